"""A running `decode serve` (waitress, embedded workers, SQLite) against the fake GitHub and
the fake Messages API: real deliveries, crashes at chosen points, and many jobs at once."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.fakes.github_check_runs import decode_runs
from tests.fakes.webhook_examples import all_examples, example
from tests.run.test_restart import EDIT_LONG_FIX, STOPPED, Killer
from tests.sandbox.conftest import require
from tests.server.conftest import SECRET, delivery
from tests.support.server import NAME, OWNER, Server, env, free_port, wait_for  # noqa: F401 (fixture)

NOTES = [[{"type": "tool_use", "name": "bash", "input": {"command": "echo noted >> NOTES.md"}}],
         [{"type": "tool_use", "name": "bash", "input": {"command": "cat NOTES.md"}}],
         [{"type": "text", "text": "Wrote the notes."}]]


def labeled(fake, number: int) -> dict:
    """A real issues.labeled example for issue `number` of the fake, carrying its title and body as GitHub would."""
    issue = fake.issue(OWNER, NAME, number)
    return example("issues", "labeled", repo=f"{OWNER}/{NAME}", sender="alice", sender_type="User",
                   issue__number=number, issue__title=issue["title"], issue__body=issue["body"],
                   label__name="agent")


def test_a_running_server_answers_every_example_and_turns_a_labeled_issue_into_one_pr(
        env, fake_github, fake_anthropic, tmp_path):
    fake_anthropic.script(NOTES, by_position=True)
    server = Server(env, tmp_path / "serve.log")
    try:
        statuses = {server.post(event, payload) for _, event, payload in all_examples()}
        assert max(statuses) < 500, statuses
        number = fake_github.add_issue(OWNER, NAME, "Write notes", "Please.", user="alice")
        assert server.post("issues", labeled(fake_github, number)) == 202
        [pr] = wait_for(lambda: fake_github.pulls(OWNER, NAME), what="the pull request")
        assert f"Fixes #{number}" in pr["body"] and pr["user"]["login"] == fake_github.bot_login
        wait_for(lambda: "Opened" in fake_github.comments(OWNER, NAME, number)[0]["body"], what="the report")
        wait_for(lambda: 'decode_jobs{state="done"} 1.0' in urllib.request.urlopen(server.url + "/metrics").read()
                 .decode(), timeout=10, what="the job recorded done (after the comment: once per sweep)")
    finally:
        assert server.stop() == 0
    log = (tmp_path / "serve.log").read_text()
    lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    assert any(line.get("job_id") == 1 for line in lines)  # structured, keyed by job id
    assert fake_github.private_key_pem.splitlines()[1] not in log and SECRET not in log


@pytest.mark.parametrize("point", ["before_clone", "mid_agent", "after_push"])
def test_a_job_survives_a_sigkill_of_the_server(env, fake_github, fake_anthropic, tmp_path, point):
    fake_anthropic.script(NOTES, by_position=True)
    pause = {
        "before_clone": lambda: fake_github.pause("GET", rf"^/repos/{OWNER}/{NAME}$"),
        "mid_agent": lambda: fake_anthropic.pause(1),
        "after_push": lambda: fake_github.pause("POST", rf"^/repos/{OWNER}/{NAME}/pulls$"),
    }[point]()
    number = fake_github.add_issue(OWNER, NAME, "Write notes", "Please.", user="alice")
    first = Server(env, tmp_path / "first.log")
    assert first.post("issues", labeled(fake_github, number)) == 202
    assert pause.reached.wait(60), (tmp_path / "first.log").read_text()
    first.kill()
    pause.release(drop=True)
    if point == "after_push":
        assert fake_github.branch_sha(OWNER, NAME, f"decode/issue-{number}-write-notes")
    second = Server(env, tmp_path / "second.log")
    try:
        wait_for(lambda: "Opened" in (fake_github.comments(OWNER, NAME, number) or [{"body": ""}])[0]["body"],
                 what="the job to finish after the restart")
    finally:
        second.stop()
    assert len(fake_github.pulls(OWNER, NAME)) == 1
    assert len(fake_github.comments(OWNER, NAME, number)) == 1  # one tracking comment, edited to the result
    assert fake_github.file(OWNER, NAME, f"decode/issue-{number}-write-notes", "NOTES.md") == "noted\n"


def test_a_job_released_by_a_stopping_server_leaves_no_container_and_reuses_its_comment(
        env, fake_github, fake_anthropic, tmp_path):
    require("docker")
    env = {**env, "SANDBOX_MODE": "docker", "DECODE_SHUTDOWN_GRACE_SECONDS": "1"}
    fake_anthropic.script(NOTES, by_position=True)
    pause = fake_anthropic.pause(1)  # the job waits on the model with its container up
    number = fake_github.add_issue(OWNER, NAME, "Write notes", "Please.", user="alice")
    first = Server(env, tmp_path / "first.log")
    assert first.post("issues", labeled(fake_github, number)) == 202
    assert pause.reached.wait(90), (tmp_path / "first.log").read_text()
    assert "working on this" in fake_github.comments(OWNER, NAME, number)[0]["body"]
    assert first.stop() == 0
    pause.release(drop=True)
    log = (tmp_path / "first.log").read_text()
    assert "released 1 running jobs and removed 1 sandboxes" in log and "Traceback" not in log
    left = subprocess.run(["docker", "ps", "-a", "-q", "--filter", "label=decode.sandbox.pid=" + str(first.proc.pid)],
                          capture_output=True, text=True, check=True).stdout
    assert left.strip() == ""
    second = Server(env, tmp_path / "second.log")
    try:
        wait_for(lambda: "Opened" in fake_github.comments(OWNER, NAME, number)[0]["body"], what="the rerun")
    finally:
        second.stop()
    assert len(fake_github.comments(OWNER, NAME, number)) == 1  # the first run's comment, edited


def test_sixteen_jobs_at_once_all_finish_in_docker_sandboxes(env, fake_github, tmp_path):
    require("docker")
    session = tmp_path / "session.json"
    session.write_text(json.dumps(NOTES))
    numbers = [fake_github.add_issue(OWNER, NAME, f"Notes {i}", "", user="alice") for i in range(16)]
    server = Server({**env, "SANDBOX_MODE": "docker", "DECODE_MODEL": f"scripted:{session}",
                     "DECODE_WORKERS": "8", "DECODE_LEASE_SECONDS": "60",
                     "DECODE_GITHUB_WRITES_PER_MINUTE": "0"},  # 16 jobs write ~180 times: GitHub's 80 a minute
                    tmp_path / "serve.log")                     # would pace them over 2 min (tests/github/test_pacing.py)
    try:
        with ThreadPoolExecutor(16) as pool:
            assert set(pool.map(lambda n: server.post("issues", labeled(fake_github, n)), numbers)) == {202}
        def ended() -> bool:  # every pull request there, or a run failed (no pull request will come for it)
            failed = any("❌" in c["body"] for n in numbers for c in fake_github.comments(OWNER, NAME, n))
            return failed or len(fake_github.pulls(OWNER, NAME)) == 16

        try:  # within pytest's 300 s, so a stuck or failed job says where it was
            wait_for(ended, timeout=240, what="16 pull requests")
            assert len(fake_github.pulls(OWNER, NAME)) == 16
        except AssertionError:
            done = {int(p["head"]["ref"].split("-")[1]) for p in fake_github.pulls(OWNER, NAME)}
            late = {n: [c["body"].split("<!--")[0][:400] for c in fake_github.comments(OWNER, NAME, n)]
                    for n in numbers if n not in done}
            raise AssertionError(f"no pull request for {late}\n{server.stacks()}") from None
    finally:
        assert server.stop() == 0
    heads = {p["head"]["ref"] for p in fake_github.pulls(OWNER, NAME)}
    assert heads == {f"decode/issue-{n}-notes-{i}" for i, n in enumerate(numbers)}


def test_serve_removes_sandbox_containers_left_by_a_dead_server(env, tmp_path):
    require("docker")
    dead_pid = "4194303"  # above any pid this kernel hands out by default
    assert not Path(f"/proc/{dead_pid}").exists()
    created = subprocess.run(["docker", "create", "--label", "decode.sandbox=left", "--label",
                              f"decode.sandbox.pid={dead_pid}", "--label", f"decode.sandbox.host={socket.gethostname()}",
                              "decode-sandbox:latest", "true"], capture_output=True, text=True, check=True)
    cid = created.stdout.strip()
    server = Server({**env, "SANDBOX_MODE": "docker"}, tmp_path / "serve.log")
    try:
        gone = subprocess.run(["docker", "inspect", cid], capture_output=True)
        assert gone.returncode != 0, "the leftover container is still there"
    finally:
        server.stop()


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def raw_post(port: int, head: bytes, body: bytes, *, timeout: float = 5.0) -> bytes:
    """Send `head` then as much of `body` as the server takes (from a thread); the status line it answers."""
    import threading

    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(head)

        def send() -> None:
            try:
                s.sendall(body)
            except OSError:  # the server answered and closed: the rest is never read
                pass

        threading.Thread(target=send, daemon=True).start()
        return s.makefile("rb").readline()


def test_a_body_over_the_limit_is_refused_before_it_is_read(env, tmp_path):
    server = Server(env, tmp_path / "serve.log")
    try:
        before = rss_bytes(server.proc.pid)
        announced = 512 * 1024 * 1024  # over the 25 MB limit, under waitress's default 1 GiB
        head = (f"POST /webhook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"X-GitHub-Event: issues\r\nContent-Length: {announced}\r\n\r\n").encode()
        began = time.monotonic()
        assert b" 413 " in raw_post(server.port, head, b"{}")  # a few bytes of the half gigabyte
        assert time.monotonic() - began < 3
        chunk = b"%x\r\n%s\r\n" % (1024 * 1024, b"x" * 1024 * 1024)
        head = (b"POST /webhook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"X-GitHub-Event: issues\r\nTransfer-Encoding: chunked\r\n\r\n")
        assert b" 413 " in raw_post(server.port, head, chunk * 40)  # 40 MB, never terminated
        assert rss_bytes(server.proc.pid) - before < 20 * 1024 * 1024
        assert server.post("ping", example("ping")) == 200  # still serving
    finally:
        assert server.stop() == 0


def test_a_server_on_an_empty_data_dir_leaves_an_earlier_servers_comments_alone(
        env, fake_github, fake_anthropic, tmp_path):
    """Job ids restart at 1 in a new store; the new job's markers must not find the old job's comment."""
    fake_anthropic.script(NOTES, by_position=True)
    number = fake_github.add_issue(OWNER, NAME, "Write notes", "Please.", user="alice")
    first = Server(env, tmp_path / "first.log")
    try:
        assert first.post("issues", labeled(fake_github, number)) == 202
        wait_for(lambda: "Opened" in (fake_github.comments(OWNER, NAME, number) or [{"body": ""}])[0]["body"],
                 what="the first run")
    finally:
        assert first.stop() == 0
    before = fake_github.comments(OWNER, NAME, number)
    second = Server({**env, "DECODE_DATA_DIR": str(tmp_path / "empty")}, tmp_path / "second.log")
    try:
        comment = fake_github.add_comment(OWNER, NAME, number, "/decode once more", user="alice")
        payload = example("issue_comment", "created", repo=f"{OWNER}/{NAME}", sender="alice", sender_type="User",
                          issue__number=number, comment__id=comment, comment__body="/decode once more")
        assert second.post("issue_comment", payload) == 202

        def settled() -> bool:  # the second job posted or edited a comment, and no comment is still working
            now = fake_github.comments(OWNER, NAME, number)
            moved = len(now) > len(before) + 1 or now[:len(before)] != before
            return moved and not any("👀 decode-bot is" in c["body"] for c in now)
        wait_for(settled, what="the second run's report")
    finally:
        assert second.stop() == 0
    after = fake_github.comments(OWNER, NAME, number)
    assert after[:len(before)] == before  # the first run's report, untouched
    assert len(after) == len(before) + 2  # the /decode comment and the second run's tracking comment


def test_a_job_whose_sandbox_dies_goes_on_in_a_new_one_and_says_so(env, fake_github, fake_anthropic, tmp_path):
    require("docker")
    fake_anthropic.script(EDIT_LONG_FIX, by_position=True)
    number = fake_github.add_issue(OWNER, NAME, "Take notes", "Please.", user="alice")
    killer = Killer("docker", 1)
    killer.start()
    server = Server({**env, "SANDBOX_MODE": "docker"}, tmp_path / "serve.log")
    try:
        assert server.post("issues", labeled(fake_github, number)) == 202
        wait_for(lambda: "Opened" in (fake_github.comments(OWNER, NAME, number) or [{"body": ""}])[0]["body"],
                 what="the report")
    finally:
        killer.done.set()
        server.stop()
    assert killer.kills == 1
    assert fake_github.file(OWNER, NAME, f"decode/issue-{number}-take-notes", "NOTES.md") == "partial\nfix\n"
    [comment] = fake_github.comments(OWNER, NAME, number)
    said = "**Sandbox:** the sandbox died once during the run, and a new one carried on with the kept workspace"
    assert said in comment["body"] and STOPPED["docker"] in comment["body"], comment["body"]
    [check] = [run for run in decode_runs(fake_github, OWNER, NAME) if run["status"] == "completed"]
    assert check["conclusion"] == "success" and said in check["output"]["text"], check["output"]
    assert len(fake_anthropic.requests) == 4, "one job, one conversation, resumed in place"


def test_a_job_github_does_not_answer_at_first_runs_again_a_lease_later_and_opens_its_pr(
        env, fake_github, fake_anthropic, tmp_path):
    fake_anthropic.script(NOTES, by_position=True)
    number = fake_github.add_issue(OWNER, NAME, "Write notes", "Please.", user="alice")
    issue = rf"^/repos/{OWNER}/{NAME}/issues/{number}$"
    fake_github.inject("GET", issue, 502, times=6, headers={"Retry-After": "0"})  # every retry of one attempt
    server = Server(env, tmp_path / "serve.log")
    try:
        assert server.post("issues", labeled(fake_github, number)) == 202
        [pr] = wait_for(lambda: fake_github.pulls(OWNER, NAME), timeout=60, what="the pull request")
        wait_for(lambda: "Opened" in fake_github.comments(OWNER, NAME, number)[0]["body"], what="the report")
    finally:
        assert server.stop() == 0
    assert f"Fixes #{number}" in pr["body"] and len(fake_github.comments(OWNER, NAME, number)) == 1
    first, second = [r.at for r in fake_github.calls("GET", issue)][5:7]
    assert second - first >= 2.0  # DECODE_LEASE_SECONDS: the job waited, it was not run again at once
    log = (tmp_path / "serve.log").read_text()
    assert "GitHub did not answer: Server Error: 502" in log and "it runs again in 2 s (attempt 2 of 3)" in log


def test_a_delivery_github_could_not_make_while_the_server_was_down_is_made_again_at_its_start(
        env, fake_github, fake_anthropic, tmp_path):
    fake_anthropic.script(NOTES, by_position=True)
    port = free_port()
    fake_github.hooks.url = f"http://127.0.0.1:{port}/webhook"
    number = fake_github.add_issue(OWNER, NAME, "Write notes", "Please.", user="alice")
    assert fake_github.hooks.send(*delivery("issues", labeled(fake_github, number))).status == "failed to connect"
    server = Server(env, tmp_path / "serve.log", port=port)
    try:
        [pr] = wait_for(lambda: fake_github.pulls(OWNER, NAME), timeout=60, what="the pull request")
    finally:
        assert server.stop() == 0
    assert f"Fixes #{number}" in pr["body"]
    assert [(d.redelivery, d.status_code) for d in fake_github.hooks.deliveries] == [(False, 0), (True, 202)]
    assert "GitHub could not make 1 webhook deliveries (issues)" in (tmp_path / "serve.log").read_text()
