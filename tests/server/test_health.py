"""A server that cannot work says so: `decode serve` and `decode worker` started with a key the model API
rejects (or none) stay up, /healthz answers 503 naming the key, labeled issues get no comment while the jobs
wait in the store, and the jobs run once a recheck finds the key accepted. All through real processes
against the fake GitHub and the fake Messages API."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request

from tests.server.test_serve import NOTES, labeled
from tests.support.cli import DECODE
from tests.support.server import NAME, OWNER, Server, env, healthz, wait_for  # noqa: F401 (fixture)

WRONG_KEY = "sk-ant-revoked-0123456789abcdef"


def queued(server: Server) -> bool:
    metrics = urllib.request.urlopen(server.url + "/metrics", timeout=10).read().decode()
    return 'decode_jobs{state="queued"} 1.0' in metrics


def labeled_and_held(fake_github, server: Server, seconds: float = 4.0) -> int:
    """A new issue, labeled through `server`; for `seconds` (many sweeps and rechecks) its job stays queued and
    the issue gets no comment. The issue's number."""
    number = fake_github.add_issue(OWNER, NAME, "Write notes", "Please.", user="alice")
    assert server.post("issues", labeled(fake_github, number)) == 202
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert fake_github.comments(OWNER, NAME, number) == [] and fake_github.pulls(OWNER, NAME) == []
        assert queued(server)
        time.sleep(0.3)
    return number


def refused(server: Server, reason: str) -> None:
    """/healthz answers 503 saying `reason` once the start-up check (asked on a thread) has answered."""
    status, body = wait_for(lambda: answer if reason in (answer := healthz(server))[1].get("reason", "") else None,
                            timeout=15, what=f"/healthz to say {reason!r}")
    assert status == 503, body


def test_a_server_whose_model_api_is_unreachable_takes_deliveries_at_once(env, fake_github, tmp_path):
    """The start-up check of an API that does not answer (its client retries for about a minute) must not keep
    the server from listening: deliveries are stored and wait, /healthz says the model is not checked yet."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{closed.getsockname()[1]}"
    started = time.monotonic()
    server = Server({**env, "ANTHROPIC_BASE_URL": dead}, tmp_path / "serve.log")
    try:
        status, body = healthz(server)
        assert time.monotonic() - started < 20, "the server waited for the model's check before it listened"
        assert status == 503 and "not answered yet" in body["reason"], body
        labeled_and_held(fake_github, server)
    finally:
        assert server.stop() == 0


def test_a_server_with_a_rejected_key_holds_the_job_and_runs_it_once_the_key_is_accepted(
        env, fake_github, fake_anthropic, tmp_path):
    fake_anthropic.script(NOTES, by_position=True)
    log = tmp_path / "serve.log"
    server = Server({**env, "ANTHROPIC_API_KEY": WRONG_KEY, "DECODE_HEALTH_RECHECK_SECONDS": "0.5"}, log)
    try:
        refused(server, "ANTHROPIC_API_KEY was rejected")
        number = labeled_and_held(fake_github, server)
        assert fake_anthropic.requests == []  # no run asked the model: only its key was checked

        fake_anthropic.api_key = WRONG_KEY  # the key is accepted again (re-enabled, billing fixed)
        wait_for(lambda: healthz(server)[0] == 200, timeout=15, what="/healthz to turn 200")
        [pr] = wait_for(lambda: fake_github.pulls(OWNER, NAME), what="the pull request")
        assert f"Fixes #{number}" in pr["body"]
        wait_for(lambda: "Opened" in fake_github.comments(OWNER, NAME, number)[0]["body"], what="the report")
        assert len(fake_github.comments(OWNER, NAME, number)) == 1
    finally:
        assert server.stop() == 0
    text = log.read_text()
    assert text.count("ANTHROPIC_API_KEY was rejected") == 1, text  # said once, not at every recheck
    assert WRONG_KEY not in text
    assert len(fake_anthropic.token_counts) < 60, "the key was asked about far more often than every 0.5 s"


def test_a_server_without_a_key_says_so_and_posts_nothing(env, fake_github, tmp_path):
    no_key = {k: v for k, v in env.items() if k != "ANTHROPIC_API_KEY"}
    server = Server({**no_key, "DECODE_HEALTH_RECHECK_SECONDS": "0.5"}, tmp_path / "serve.log")
    try:
        refused(server, "ANTHROPIC_API_KEY is not set")
        labeled_and_held(fake_github, server)
    finally:
        assert server.stop() == 0


def test_a_worker_with_a_rejected_key_holds_the_jobs_of_the_store_until_it_is_accepted(
        env, fake_github, fake_anthropic, tmp_path):
    fake_anthropic.script(NOTES, by_position=True)
    intake = Server({**env, "DECODE_WORKERS": "0"}, tmp_path / "serve.log")
    out = tmp_path / "worker.log"
    with open(out, "ab") as sink:
        worker = subprocess.Popen([DECODE, "worker"], env={**env, "ANTHROPIC_API_KEY": WRONG_KEY,
                                                          "DECODE_HEALTH_RECHECK_SECONDS": "0.5"},
                                  stdout=sink, stderr=sink)
    try:
        wait_for(lambda: "ANTHROPIC_API_KEY was rejected" in out.read_text(), timeout=30, what="the worker's check")
        labeled_and_held(fake_github, intake)
        assert worker.poll() is None, out.read_text()  # a rejected key does not stop it

        fake_anthropic.api_key = WRONG_KEY
        wait_for(lambda: fake_github.pulls(OWNER, NAME), what="the pull request by the worker")
    finally:
        worker.terminate()
        assert worker.wait(timeout=60) == 0, out.read_text()
        assert intake.stop() == 0
