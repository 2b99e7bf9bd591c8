"""Every entry point (`decode run`, `decode action`, `decode serve`, `decode worker`) walked through the
inputs that go wrong (issue 11), each as a real process against the fake GitHub and the fake Messages API.

For every row: the exit status (0 done or nothing to change, 1 failed, 2 a setting or input to fix, 3 a
budget cap), the error as the last line of stderr, no "Traceback" anywhere, and nothing of the row left
running. The Action always writes its outputs and summary. A wrong API key ends `failed` before any clone.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bot.config import DEFAULT_MODEL
from bot.jobs.sqlite import Store
from bot.github.work import Issue, job_key, job_payload
from tests.conftest import git, make_repo
from tests.server.conftest import SECRET
from tests.support.action import rewritten
from tests.support.cli import DECODE, EXAMPLE, printed

OWNER, NAME, REPO = "octo", "calendar", "octo/calendar"
FILES = {p.name: p.read_text() for p in (EXAMPLE / "repo").iterdir()}
TASK = "Write notes"
WRONG_KEY = "sk-ant-wrong-key-0000000000"
REJECTED = "ANTHROPIC_API_KEY was rejected (401 authentication_error): set a valid key"
NOTE = [[{"type": "tool_use", "name": "bash", "input": {"command": "echo noted >> NOTES.md"}}],
        [{"type": "text", "text": "Wrote the notes."}]]
BROKEN_PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAthisisnotakey\n-----END RSA PRIVATE KEY-----\n"
ODD_NAME = os.fsdecode(b"caf\xe9.txt")  # Latin-1 bytes: not UTF-8


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class World:
    """What a row runs against: the fakes, its own directory, the local repository and the issue."""

    github: object
    api: object
    tmp: Path
    repo: Path
    issue: int
    env: dict[str, str] = field(default_factory=dict)
    argv: list[str] = field(default_factory=list)
    event: object = None  # the Action's event: a payload (dict), raw bytes, or None for no file at all
    turns: list = field(default_factory=lambda: NOTE)  # the session a row without `api` replays
    job_id: int | None = None

    def fill(self, text: str) -> str:
        return (text.replace("{repo}", str(self.repo)).replace("{tmp}", str(self.tmp))
                .replace("{issue}", str(self.issue)).replace("{port}", str(free_port())))

    def session(self) -> str:
        """A session file for DECODE_MODEL=scripted:PATH holding `turns` (JSON, or raw text)."""
        path = self.tmp / "session.json"
        path.write_text(self.turns if isinstance(self.turns, str) else json.dumps(self.turns))
        return str(path)


@dataclass
class Done:
    code: int
    stdout: str
    stderr: str
    outputs: dict[str, str] = field(default_factory=dict)
    summary: str = ""
    seconds: float = 0.0


@dataclass
class Row:
    """One input on one entry point: `argv` after the command ({repo}, {tmp}, {issue}, {port} filled in),
    `env` on top of the entry point's, `arrange(world)` for the rest; the exit status and what the
    last line of stderr says. A row with `until` runs until that holds, then gets `signum`."""

    entry: str  # run | action | serve | worker
    code: int
    says: str
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    arrange: Callable[[World], None] | None = None
    until: Callable[[World, Path], bool] | None = None
    check: Callable[[World, Done], None] | None = None
    api: bool = False  # talk to the fake Messages API; else replay `World.turns` (DECODE_MODEL=scripted:)
    signum: int = signal.SIGTERM  # what a row with `until` is sent


# -- arrangements and checks --------------------------------------------------------------------------------

def git_requests(w: World) -> list:
    return [r for r in w.github.requests if r.kind == "git"]


def clones(w: World) -> list[Path]:
    data = w.tmp / "data"
    return list(data.rglob(".git")) if data.exists() else []


def nothing_cloned(w: World, done: Done) -> None:
    assert not git_requests(w) and not clones(w), "cloned before the preflight failed"
    assert not w.api.requests and not w.github.pulls(OWNER, NAME)
    assert WRONG_KEY not in done.stdout + done.stderr + done.summary


def tracking_names_the_key(w: World, done: Done) -> None:
    nothing_cloned(w, done)
    [tracking] = w.github.comments(OWNER, NAME, w.issue)
    assert REJECTED in tracking["body"] and "made no changes" not in tracking["body"], tracking["body"]
    assert WRONG_KEY not in tracking["body"]


def action_failed_on_the_key(w: World, done: Done) -> None:
    assert done.outputs["conclusion"] == "failed" and done.outputs["pr_url"] == ""
    assert REJECTED in done.summary and f"::error title=decode-bot::{REJECTED}" in done.stdout
    tracking_names_the_key(w, done)


def worker_held_the_job(w: World, done: Done) -> None:
    """A worker whose key is rejected says so once and leaves the job waiting: no attempt, no comment."""
    store = Store(w.tmp / "data" / "jobs.sqlite3")
    try:
        job = store.job(w.job_id)
    finally:
        store.close()
    assert (job.state, job.attempts) == ("queued", 0), job
    assert w.github.comments(OWNER, NAME, w.issue) == []
    assert done.stderr.count(REJECTED) == 1 and WRONG_KEY not in done.stderr


def queue_the_issue(w: World) -> None:
    """A labeled issue as `decode serve` would have queued it, for `decode worker` to run."""
    trigger = Issue(repo=REPO, number=w.issue, sender_login="alice")
    store = Store(w.tmp / "data" / "jobs.sqlite3")
    try:
        w.job_id = store.record_delivery("d-1", "issues", "queued",
                                         (job_key(trigger), job_payload(trigger, "issues", "d-1")))
    finally:
        store.close()


def held_a_while(w: World, log: Path) -> bool:
    """The worker runs, has said why it waits, and had a few sweeps to (not) claim the job."""
    text = log.read_text(errors="replace")
    if REJECTED not in text or "worker running" not in text:
        return False
    time.sleep(2)
    return True


def logged(text: str) -> Callable[[World, Path], bool]:
    return lambda w, log: text in log.read_text(errors="replace")


def healthy(w: World, log: Path) -> bool:
    import urllib.request

    port = w.argv[w.argv.index("--port") + 1]
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False


def wrong_key(w: World) -> None:
    w.env["ANTHROPIC_API_KEY"] = WRONG_KEY


def unknown_model(w: World) -> None:
    w.api.models = {DEFAULT_MODEL}
    w.env["DECODE_MODEL"] = "claude-nope-1"


def outage_after_an_edit(status: int) -> Callable[[World], None]:
    def arrange(w: World) -> None:
        w.api.script([[{"type": "tool_use", "name": "bash", "input": {"command": "echo partial >> NOTES.md"}}],
                      [{"type": "text", "text": "never served"}]])
        w.api.inject(status, retry_after_ms=1, at=1)  # the first turn is served; every retry of the second fails
    return arrange


def branch_keeps_the_edit(w: World, done: Done) -> None:
    assert git(w.repo, "show", f"{printed(done.stdout, 'branch')}:NOTES.md") == "partial"


def draft_keeps_the_edit(w: World, done: Done) -> None:
    [pr] = w.github.pulls(OWNER, NAME)
    assert pr["draft"] and pr["html_url"] in done.stderr.strip().splitlines()[-1]
    assert "**Failed: stopped by an error.**" in pr["body"] and "overloaded_error" in pr["body"]
    assert w.github.file(OWNER, NAME, pr["head"]["ref"], "NOTES.md") == "partial\n"
    assert [r.status for r in w.api.requests] == [200] + [529] * 6


def odd_name_in_the_repository(w: World, where: str) -> None:
    (w.repo / where).mkdir(exist_ok=True)
    (w.repo / where / ODD_NAME).write_text("latin-1 name\n")
    git(w.repo, "add", "-A")
    git(w.repo, "commit", "-q", "-m", "a file whose name is not UTF-8")


def edit_then(tool: dict, where: str = "") -> Callable[[World], None]:
    """An edit, then `tool` meeting a file (in the top level, or in `where`) whose name is not UTF-8."""
    def arrange(w: World) -> None:
        odd_name_in_the_repository(w, where)
        w.turns = ([[{"type": "tool_use", "name": "bash", "input": {"command": "echo partial >> NOTES.md"}}],
                    [{"type": "tool_use", **tool}],
                    [{"type": "text", "text": "Done."}]])
    return arrange


def event(payload: object) -> Callable[[World], None]:
    def arrange(w: World) -> None:
        w.event = payload
    return arrange


def scripted(turns: object) -> Callable[[World], None]:
    def arrange(w: World) -> None:
        w.turns = turns
    return arrange


def github_502_first(path: str) -> Callable[[World], None]:
    def arrange(w: World) -> None:
        w.github.inject("GET", path, status=502)
    return arrange


def pr_opened(w: World, done: Done) -> None:
    [pr] = w.github.pulls(OWNER, NAME)
    assert w.github.file(OWNER, NAME, pr["head"]["ref"], "NOTES.md") == "noted\n"
    assert [r.status for r in w.github.calls("GET", rf"^/repos/{OWNER}/{NAME}$")][:2] == [502, 200]


def app_asked_twice(w: World, done: Done) -> None:
    assert [r.status for r in w.github.calls("GET", "^/app$")][:2] == [502, 200]


def relative_data_dir(w: World, done: Done) -> None:
    transcript = Path(printed(done.stdout, "transcript"))
    assert transcript.is_absolute() and transcript.is_relative_to(w.tmp / "state") and transcript.is_file()
    assert not (w.repo / "state").exists()


def no_github_calls(w: World, done: Done) -> None:
    assert not w.github.requests, [f"{r.method} {r.path}" for r in w.github.requests]


def said_once(w: World, done: Done) -> None:
    """The reason is one line, said once (not also by a log record of the layer that found it). A retry of a
    transient failure is said too, and is not the reason (a loaded CI machine once dropped the first connection)."""
    lines = [line for line in done.stderr.splitlines() if line.strip() and "; retrying in " not in line]
    assert len(lines) == 1 and lines[0].startswith("decode: "), done.stderr


def said_nothing(w: World, done: Done) -> None:
    """The Action says a failure in its annotation (and the job summary) only."""
    assert not done.stderr.strip(), done.stderr


def names_the_port(w: World, done: Done) -> None:
    assert f"127.0.0.1:{w.argv[1]}" in done.stderr, done.stderr


def busy_port(w: World) -> None:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    w.holder = holder  # type: ignore[attr-defined]
    w.argv[:] = ["--port", str(holder.getsockname()[1])]


def setup_mode(w: World, log: Path) -> bool:
    """`decode serve` is up in setup mode: /webhook answers 503 pointing at /setup, signed or not."""
    import urllib.error
    import urllib.request

    port = w.argv[w.argv.index("--port") + 1]
    request = urllib.request.Request(f"http://127.0.0.1:{port}/webhook", data=b"{}", method="POST")
    try:
        urllib.request.urlopen(request, timeout=2)
    except urllib.error.HTTPError as e:
        return e.code == 503 and "finish setup at /setup" in e.read().decode()
    except OSError:
        return False
    return False


def logged_the_setup_link(w: World, done: Done) -> None:
    no_github_calls(w, done)
    assert "/setup?key=" in done.stderr and not (w.tmp / "data" / "app.json").exists(), done.stderr


def app_saved_by_setup(w: World) -> None:
    from bot.github.app_credentials import StoredApp, save

    save(w.tmp / "data", StoredApp(id=w.github.app_id, slug=w.github.app.slug, html_url="https://x/apps/decode-bot",
                                   client_id="Iv23x", pem=w.github.private_key_pem, webhook_secret=SECRET,
                                   client_secret="s"))


def damaged_app_file(w: World) -> None:
    (w.tmp / "data").mkdir(parents=True, exist_ok=True)
    (w.tmp / "data" / "app.json").write_text("{}")


NO_APP = {"GITHUB_APP_ID": "", "GITHUB_APP_PRIVATE_KEY": "", "GITHUB_WEBHOOK_SECRET": ""}


NO_PRICE = {"DECODE_MODEL": "scripted-x", "DECODE_PRICES": '{"scripted-x": {"input": 3}}'}
PRICE_SAYS = "DECODE_PRICES: the row for 'scripted-x' has no 'output'"
LOCAL = ["--repo", "{repo}", TASK]
ON_GITHUB = ["--repo", REPO, TASK]

ROWS: dict[str, Row] = {
    # a wrong key: failed everywhere, before any clone; a setting to fix (exit 2), whichever the provider
    "run local, wrong key": Row("run", 2, f"decode: {REJECTED}", LOCAL, arrange=wrong_key, check=nothing_cloned,
                                api=True),
    "run --issue, wrong key": Row("run", 2, f"decode: {REJECTED}", ["--repo", REPO, "--issue", "{issue}"],
                                  arrange=wrong_key, check=tracking_names_the_key, api=True),
    "action, wrong key": Row("action", 2, REJECTED, arrange=wrong_key, check=action_failed_on_the_key, api=True),
    "worker, wrong key": Row("worker", 0, "worker pool stopped", arrange=lambda w: (wrong_key(w), queue_the_issue(w)),
                             until=held_a_while, check=worker_held_the_job, api=True),
    # the model: unknown, or an outage that outlasts every retry (the work so far is kept)
    "run, unknown model id": Row("run", 1, "decode: DECODE_MODEL=claude-nope-1 is not a model this key can use",
                                 LOCAL, arrange=unknown_model, check=nothing_cloned, api=True),
    "run local, 529 outage": Row("run", 1, "the Anthropic API", LOCAL, arrange=outage_after_an_edit(529),
                                 check=branch_keeps_the_edit, api=True),
    "run owner/name, 529 outage": Row("run", 1, "decode-bot failed: the Anthropic API", ON_GITHUB,
                                      arrange=outage_after_an_edit(529), check=draft_keeps_the_edit, api=True),
    "action, 500 outage": Row("action", 1, "the Anthropic API", arrange=outage_after_an_edit(500), api=True),
    # file names that are not UTF-8: the agent's earlier edit is still committed
    "run, non-UTF-8 name at the top level": Row("run", 0, "", LOCAL, arrange=edit_then(
        {"name": "bash", "input": {"command": "ls"}}), check=branch_keeps_the_edit),
    "run, non-UTF-8 name from glob": Row("run", 0, "", LOCAL, arrange=edit_then(
        {"name": "glob", "input": {"pattern": "**/*.txt"}}, "docs"), check=branch_keeps_the_edit),
    "run, non-UTF-8 name from grep": Row("run", 0, "", LOCAL, arrange=edit_then(
        {"name": "grep", "input": {"pattern": "latin"}}, "docs"), check=branch_keeps_the_edit),
    # GitHub inputs
    "run --issue 999": Row("run", 2, "#999 is not an issue or pull request of octo/calendar",
                           ["--repo", REPO, "--issue", "999"]),
    "run --repo octo/nosuch": Row("run", 2, "octo/nosuch cannot be read with this token (404",
                                  ["--repo", "octo/nosuch", TASK], check=said_once),
    "run, bad GitHub token": Row("run", 2, "the GitHub token was rejected", ON_GITHUB,
                                 env={"GITHUB_TOKEN": "ghp_" + "x" * 36}, check=said_once),
    "action, bad GitHub token": Row("action", 2, "the GitHub token was rejected",
                                    env={"GITHUB_TOKEN": "ghp_" + "x" * 36}, check=said_nothing),
    "run, GitHub unreachable": Row("run", 1, "cannot reach GitHub", ON_GITHUB,
                                   env={"GITHUB_API_URL": "http://127.0.0.1:{port}/api/v3"}),
    "worker, bad GitHub token": Row("worker", 2, "GET /user answered 401", env={
        "GITHUB_APP_ID": "", "GITHUB_APP_PRIVATE_KEY": "", "GITHUB_TOKEN": "ghp_" + "x" * 36}),
    "worker, GitHub unreachable": Row("worker", 1, "cannot reach GitHub",
                                      env={"GITHUB_API_URL": "http://127.0.0.1:{port}/api/v3"}),
    # a first GitHub call answered 502 is retried
    "run, first GitHub call 502": Row("run", 0, "", ON_GITHUB, arrange=github_502_first(rf"^/repos/{OWNER}/{NAME}$"),
                                      check=pr_opened),
    "action, first GitHub call 502": Row("action", 0, "", arrange=github_502_first(rf"^/repos/{OWNER}/{NAME}$"),
                                         check=pr_opened),
    "worker, first GitHub call 502": Row("worker", 0, "worker pool stopped", arrange=github_502_first("^/app$"),
                                         until=logged("worker running"), check=app_asked_twice),
    "serve, first GitHub call 502": Row("serve", 0, "", ["--port", "{port}"], arrange=github_502_first("^/app$"),
                                        until=healthy, check=app_asked_twice),
    # the Action's event file
    "action, event file missing": Row("action", 2, "cannot read the event file", arrange=event(None)),
    "action, event file not JSON": Row("action", 2, "the event file is not JSON", arrange=event(b"{not json")),
    "action, event file not UTF-8": Row("action", 2, "the event file is not UTF-8",
                                        arrange=event(b'{"a": "\xff"}')),
    "action, event file not an object": Row("action", 2, "not a JSON object", arrange=event([1])),
    # settings
    "run, relative DECODE_DATA_DIR": Row("run", 0, "", [TASK], env={"DECODE_DATA_DIR": "../state"},
                                         check=relative_data_dir),
    "action, relative DECODE_DATA_DIR": Row("action", 0, "", env={"DECODE_DATA_DIR": "state"}),
    "run, DECODE_PRICES without output": Row("run", 2, PRICE_SAYS, LOCAL, env=NO_PRICE),
    "action, DECODE_PRICES without output": Row("action", 2, PRICE_SAYS, env=NO_PRICE),
    "serve, DECODE_PRICES without output": Row("serve", 2, PRICE_SAYS, ["--port", "{port}"], env=NO_PRICE),
    "worker, DECODE_PRICES without output": Row("worker", 2, PRICE_SAYS, env=NO_PRICE),
    "worker, DECODE_WORKERS=0": Row("worker", 2, "DECODE_WORKERS=0 leaves decode worker nothing to do",
                                    env={"DECODE_WORKERS": "0"}),
    "serve, DECODE_WORKERS not a count": Row("serve", 2, "DECODE_WORKERS='two' is not valid", ["--port", "{port}"],
                                             env={"DECODE_WORKERS": "two"}),
    "worker, DECODE_POOL_SIZE not a count": Row("worker", 2, "DECODE_POOL_SIZE='lots' is not valid",
                                                env={"DECODE_POOL_SIZE": "lots"}),
    # scripted sessions
    "run, scripted session not JSON": Row("run", 2, "not a session or transcript file", LOCAL,
                                          arrange=scripted("{turns: oops")),
    "run, scripted turn not blocks": Row("run", 2, "scripted turn 1 is not a list of content blocks", LOCAL,
                                         arrange=scripted([[1, 2]])),
    "run, scripted turns not a list": Row("run", 2, "the turns must be a list", LOCAL, arrange=scripted({"turns": "x"})),
    "run, scripted tool_use without a name": Row("run", 2, "scripted turn 1", LOCAL,
                                                 arrange=scripted([[{"type": "tool_use"}]])),
    "run, scripted session missing": Row("run", 2, "cannot read the script", LOCAL,
                                         env={"DECODE_MODEL": "scripted:{tmp}/nope.json"}),
    "run, scripted session exhausted": Row("run", 1, "the scripted session has only 1 turns", LOCAL,
                                           arrange=scripted(NOTE[:1])),
    "action, scripted session not JSON": Row("action", 2, "not a session or transcript file",
                                             arrange=scripted("{turns: oops")),
    # serve and worker start-up
    "serve, busy port": Row("serve", 2, "in use", arrange=busy_port, check=names_the_port),
    **{f"serve --port {port}": Row("serve", 2, f"--port {port} is not a port: give one from 1 to 65535",
                                   ["--port", port], check=no_github_calls) for port in ("99999", "0", "-1")},
    "serve, broken App key": Row("serve", 2, "GITHUB_APP_PRIVATE_KEY does not load as an RSA private key",
                                 ["--port", "{port}"], env={"GITHUB_APP_PRIVATE_KEY": BROKEN_PEM},
                                 check=no_github_calls),
    "worker, broken App key": Row("worker", 2, "GITHUB_APP_PRIVATE_KEY does not load as an RSA private key",
                                  env={"GITHUB_APP_PRIVATE_KEY": BROKEN_PEM}, check=no_github_calls),
    # without App credentials: serve comes up in setup mode (docs/setup.md); partly configured is still an error
    "serve, no App credentials": Row("serve", 0, "", ["--port", "{port}"], env=NO_APP, until=setup_mode,
                                     check=logged_the_setup_link),
    "serve, App id without a key": Row("serve", 2, "GITHUB_APP_PRIVATE_KEY is not set", ["--port", "{port}"],
                                       env={"GITHUB_APP_PRIVATE_KEY": "", "GITHUB_WEBHOOK_SECRET": ""},
                                       check=no_github_calls),
    "serve, App without a webhook secret": Row("serve", 2, "GITHUB_WEBHOOK_SECRET is not set", ["--port", "{port}"],
                                               env={"GITHUB_WEBHOOK_SECRET": ""}, check=no_github_calls),
    "serve, damaged app.json": Row("serve", 2, "app.json is not a GitHub App saved by /setup", ["--port", "{port}"],
                                   env=NO_APP, arrange=damaged_app_file, check=no_github_calls),
    "worker, no App credentials": Row("worker", 2, "no GitHub App yet: finish setup at /setup", env=NO_APP,
                                      check=no_github_calls),
    "worker, the App /setup saved": Row("worker", 0, "worker pool stopped", env=NO_APP, arrange=app_saved_by_setup,
                                        until=logged("worker running")),
}
PARAMS = [pytest.param(row, id=name, marks=getattr(row, "marks", ())) for name, row in ROWS.items()]


# -- running an entry point ------------------------------------------------------------------------------

def base_env(entry: str, w: World, marker: str) -> dict[str, str]:
    env = {"PATH": os.environ["PATH"], "HOME": str(w.tmp / "home"), "SANDBOX_MODE": "local",
           "ANTHROPIC_API_KEY": w.api.api_key, "ANTHROPIC_BASE_URL": w.api.url,
           "DECODE_DATA_DIR": str(w.tmp / "data"), "GITHUB_API_URL": w.github.api_url,
           "PYTHONPATH": str(EXAMPLE.parents[1]), "DECODE_TEST_ROW": marker}
    if entry == "run":
        env["GITHUB_TOKEN"] = w.github.token
    elif entry == "action":
        env.update({"GITHUB_TOKEN": w.github.token, "GITHUB_EVENT_NAME": "issues",
                    "GITHUB_EVENT_PATH": str(w.tmp / "event.json"), "GITHUB_REPOSITORY": REPO,
                    "GITHUB_SERVER_URL": w.github.web_url, "GITHUB_RUN_ID": "4242", "GITHUB_ACTIONS": "true",
                    "GITHUB_ACTOR": "alice", "GITHUB_OUTPUT": str(w.tmp / "output"),
                    "GITHUB_STEP_SUMMARY": str(w.tmp / "summary.md"), "CI": "true"})
    else:
        env.update({"GITHUB_WEBHOOK_SECRET": SECRET, "GITHUB_APP_ID": str(w.github.app_id),
                    "GITHUB_APP_PRIVATE_KEY": w.github.private_key_pem, "DECODE_LEASE_SECONDS": "2",
                    "DECODE_WORKERS": "1", "DECODE_SHUTDOWN_GRACE_SECONDS": "5"})
    return env


def launch(row: Row, w: World, marker: str) -> Done:
    w.argv[:] = map(w.fill, w.argv)
    argv = [DECODE, row.entry, *w.argv]
    env = {**base_env(row.entry, w, marker), **{k: w.fill(v) for k, v in w.env.items()}}
    if not row.api:
        env.setdefault("DECODE_MODEL", f"scripted:{w.session()}")
    env = {k: v for k, v in env.items() if v != "" and not k.startswith("_")}
    cwd = w.repo if row.entry == "run" else w.tmp
    if row.entry == "action":
        (w.tmp / "output").write_text("")
        (w.tmp / "summary.md").write_text("")
        if w.event is not None:
            body = w.event if isinstance(w.event, bytes) else json.dumps(w.event).encode()
            (w.tmp / "event.json").write_bytes(body)
    began = time.monotonic()
    if row.until is None:
        res = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
        done = Done(res.returncode, res.stdout, res.stderr, seconds=time.monotonic() - began)
    else:
        out, err = w.tmp / "stdout.log", w.tmp / "stderr.log"
        with open(out, "wb") as o, open(err, "wb") as e:
            proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=o, stderr=e)
        try:
            deadline = time.monotonic() + 60
            while not row.until(w, err):
                assert proc.poll() is None, f"exited with {proc.returncode}: {err.read_text()}"
                assert time.monotonic() < deadline, f"timed out: {err.read_text()}"
                time.sleep(0.1)
        finally:
            proc.send_signal(row.signum)
            code = proc.wait(timeout=30)
        done = Done(code, out.read_text(errors="replace"), err.read_text(errors="replace"))
    if row.entry == "action":
        done.outputs = dict(line.split("=", 1) for line in (w.tmp / "output").read_text().splitlines() if "=" in line)
        done.summary = (w.tmp / "summary.md").read_text()
    return done


def left_running(marker: str, tmp: Path) -> list[str]:
    """Processes (other than this one and its own helpers) whose environment, command line or working
    directory names this row: its marker variable or its directory."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            stat = (proc / "stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid():  # the fakes' git http-backend
                continue
            environ = (proc / "environ").read_bytes()
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ")
            cwd = os.readlink(proc / "cwd")
        except (OSError, IndexError, ValueError):
            continue
        if marker.encode() in environ or str(tmp).encode() in cmdline or cwd.startswith(str(tmp)):
            found.append(f"{proc.name}: {cmdline.decode(errors='replace')[:200]}")
    return found


@pytest.fixture
def world(fake_github, fake_anthropic, tmp_path) -> World:
    fake_github.add_repo(OWNER, NAME, FILES)
    fake_github.add_user("alice")
    fake_github.set_permission(OWNER, NAME, "alice", "write")
    number = fake_github.add_issue(OWNER, NAME, "Weekend check is wrong", "Saturdays count as workdays.",
                                   user="alice")
    fake_anthropic.script(NOTE)
    repo = make_repo(tmp_path / "calendar", FILES)
    payload = rewritten("issues", "labeled", issue__number=number, label__name="agent")
    return World(fake_github, fake_anthropic, tmp_path, repo, number, event=payload)


@pytest.mark.parametrize("row", PARAMS)
def test_entry_point_input(world: World, row: Row):
    exercise(world, row)


def exercise(w: World, row: Row) -> Done:
    """`row` run through its entry point in `w`, with what every row asserts; what it did."""
    w.argv, w.env = list(row.argv), dict(row.env)
    if row.arrange is not None:
        row.arrange(w)
    marker = secrets.token_hex(8)
    done = launch(row, w, marker)
    if getattr(w, "holder", None) is not None:
        w.holder.close()  # type: ignore[attr-defined]
    everything = done.stdout + done.stderr
    assert "Traceback" not in everything, everything
    assert done.code == row.code, everything
    if row.says:  # the Action says it in the annotation of a failed step, the others on stderr's last line
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        if row.entry == "action":
            lines = [line for line in done.stdout.splitlines() if line.startswith("::error title=decode-bot::")]
        assert lines and w.fill(row.says) in lines[-1], everything
    assert not left_running(marker, w.tmp), left_running(marker, w.tmp)
    if row.entry in ("serve", "worker") and row.until is None:
        assert done.seconds < 10, f"{row.entry} took {done.seconds:.1f} s to refuse its settings: not fast"
    if row.entry == "action":
        assert "conclusion=" in (w.tmp / "output").read_text(), everything
        assert done.summary.strip(), everything
    if row.check is not None:
        row.check(w, done)
    return done
