"""The README's exit table, row by row, in every door (issue 33): 0 done or nothing to change, 1 failed, 2 a
bad setting or input, 3 a budget cap or a sandbox that kept dying (the partial work committed), 130
interrupted. Each cell is the real console script (`decode run` on a local path and on a GitHub repository,
`decode action`, `decode serve`, `decode worker`, `decode eval`, `decode check`) against the fake GitHub,
with a scripted agent on the local sandbox; tests/test_entry_points.py's machinery runs it and asserts what
every entry point owes (no traceback, the reason as the last line, nothing left running).
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import git
from tests.support.cli import DECODE, printed
from tests.test_entry_points import (NAME, NOTE, OWNER, REPO, TASK, Done, Row, World, exercise, healthy, logged,
                                     nothing_cloned, world)  # noqa: F401 (fixture)

EDIT = [{"type": "tool_use", "name": "bash", "input": {"command": "echo partial >> NOTES.md"}}]
NOTHING = [[{"type": "text", "text": "Nothing to change."}]]
EDIT_THEN_SLEEP = [EDIT, [{"type": "tool_use", "name": "bash", "input": {"command": "sleep 60"}}],
                   [{"type": "text", "text": "Never reached."}]]
EDIT_THEN_DIE = [EDIT, [{"type": "tool_use", "name": "bash", "input": {"command": "kill -9 $PPID"}}],
                 [{"type": "text", "text": "Never reached."}]]
EDIT_TWICE = [EDIT, EDIT, [{"type": "text", "text": "Never reached."}]]
LOOK_TWICE = [[{"type": "tool_use", "name": "bash", "input": {"command": "ls"}}]] * 2 + [NOTHING[0]]
LOCAL, ON_GITHUB = ["--repo", "{repo}", TASK], ["--repo", REPO, TASK]
EVAL = ["{tmp}/tasks.jsonl", "--out", "{tmp}/out"]
NO_MODAL = {"SANDBOX_MODE": "modal", "MODAL_TOKEN_ID": "", "MODAL_TOKEN_SECRET": ""}
MODAL_SAYS = "SANDBOX_MODE=modal needs Modal credentials"
NO_DOCKER = {"SANDBOX_MODE": "docker", "DOCKER_HOST": "unix:///nonexistent/docker.sock"}
DOCKER_SAYS = "the Docker engine is not answering"
DIES = {"DECODE_MAX_RESTARTS": "0"}
ONE_TURN = {"DECODE_MAX_TURNS": "1"}
BUSY = "turn   1 |"  # the first tool call is done: the second, `sleep 60`, is running


def turns(session: list) -> Callable[[World], None]:
    def arrange(w: World) -> None:
        w.turns = session
    return arrange


def tasks(session: list) -> Callable[[World], None]:
    """`decode eval`'s task file: one task on the local repository, resolved once NOTES.md exists."""
    def arrange(w: World) -> None:
        w.turns = session
        task = {"id": "t1", "repo": str(w.repo), "base": "main", "task": TASK, "check": "test -f NOTES.md"}
        (w.tmp / "tasks.jsonl").write_text(json.dumps(task) + "\n")
    return arrange


def busy(w: World, log: Path) -> bool:
    """The agent's `sleep 60` has started (its first call, the edit, is done)."""
    if BUSY not in log.read_text(errors="replace"):
        return False
    time.sleep(1)
    return True


def local_branch(text: str) -> Callable[[World, Done], None]:
    """The run branch in the user's repository holds NOTES.md as `text`."""
    def check(w: World, done: Done) -> None:
        assert git(w.repo, "show", f"{printed(done.stdout, 'branch')}:NOTES.md") == text
    return check


def no_branch(w: World, done: Done) -> None:
    assert git(w.repo, "branch", "--list", "decode/*") == "", "nothing to change: no branch"


def pull(draft: bool) -> Callable[[World, Done], None]:
    """One pull request whose branch holds the edit, a draft when the run stopped early."""
    def check(w: World, done: Done) -> None:
        [pr] = w.github.pulls(OWNER, NAME)
        assert pr["draft"] is draft, pr
        assert w.github.file(OWNER, NAME, pr["head"]["ref"], "NOTES.md").startswith("partial\n")
    return check


def no_pull(w: World, done: Done) -> None:
    assert w.github.pulls(OWNER, NAME) == []


def listed_with_pr_and_commit(w: World, done: Done) -> None:
    """Issue 33, item 4: record.json and `decode runs` hold the pull request and the commit GitHub has; every
    path `decode run` printed exists."""
    pull(False)(w, done)
    [pr] = w.github.pulls(OWNER, NAME)
    head = w.github.branch_sha(OWNER, NAME, pr["head"]["ref"])
    [record] = (w.tmp / "data" / "runs").glob("*/record.json")
    kept = json.loads(record.read_text())
    assert (kept["pr_url"], kept["commit"]) == (pr["html_url"], head), kept
    runs = subprocess.run([DECODE, "runs"], env={"PATH": "/usr/bin:/bin", "DECODE_DATA_DIR": str(w.tmp / "data"),
                                                 "HOME": str(w.tmp / "home")}, capture_output=True, text=True)
    assert pr["html_url"] in runs.stdout and head[:12] in runs.stdout, runs.stdout
    for line in done.stdout.splitlines():
        value = line.split(": ", 1)[-1]
        if value.startswith("/"):
            assert Path(value).exists(), f"{line}: printed, but not there"


def eval_result(status: str) -> Callable[[World, Done], None]:
    def check(w: World, done: Done) -> None:
        [result] = [json.loads(line) for line in (w.tmp / "out" / "results.jsonl").read_text().splitlines()]
        assert result["status"] == status, result
    return check


def action_conclusion(state: str) -> Callable[[World, Done], None]:
    def check(w: World, done: Done) -> None:
        assert done.outputs["conclusion"] == state, done.outputs
    return check


def both(*checks: Callable[[World, Done], None]) -> Callable[[World, Done], None]:
    def check(w: World, done: Done) -> None:
        for each in checks:
            each(w, done)
    return check


INTERRUPTED = {"until": busy, "signum": signal.SIGINT}
TABLE: dict[str, Row] = {
    # 0: done
    "run local, done": Row("run", 0, "", LOCAL, check=local_branch("noted")),
    "run owner/name, done": Row("run", 0, "", ON_GITHUB, arrange=turns([EDIT, NOTE[1]]),
                                check=listed_with_pr_and_commit),
    "action, done": Row("action", 0, "", check=action_conclusion("success")),
    "eval, done": Row("eval", 0, "", EVAL, arrange=tasks(NOTE), check=eval_result("resolved")),
    "check, done": Row("check", 0, "", ["--repo", "{repo}"]),
    "serve, stopped (SIGTERM)": Row("serve", 0, "", ["--port", "{port}"], until=healthy),
    "worker, stopped (SIGTERM)": Row("worker", 0, "worker pool stopped", until=logged("worker running")),
    # 0: nothing to change
    "run local, nothing to change": Row("run", 0, "", LOCAL, arrange=turns(NOTHING), check=no_branch),
    "run owner/name, nothing to change": Row("run", 0, "", ON_GITHUB, arrange=turns(NOTHING), check=no_pull),
    "action, nothing to change": Row("action", 0, "", arrange=turns(NOTHING), check=action_conclusion("no_changes")),
    # 1: failed (the model's session ends before its answer; the work so far is kept)
    "run local, failed": Row("run", 1, "the scripted session has only 1 turns", LOCAL, arrange=turns([EDIT]),
                             check=local_branch("partial")),
    "run owner/name, failed": Row("run", 1, "the scripted session has only 1 turns", ON_GITHUB,
                                  arrange=turns([EDIT]), check=pull(True)),
    "action, failed": Row("action", 1, "the scripted session has only 1 turns", arrange=turns([EDIT]),
                          check=action_conclusion("failed")),
    "eval, a task errored": Row("eval", 1, "", EVAL, arrange=tasks([[{"type": "tool_use", "name": "bash",
                                                                      "input": {"command": "true"}}]]),
                                check=eval_result("error")),
    # 2: a bad setting or input, before any work
    "run local, bad flag": Row("run", 2, "--max-turns 0 is not valid", ["--max-turns", "0", *LOCAL]),
    "run owner/name, bad issue": Row("run", 2, "#999 is not an issue", ["--repo", REPO, "--issue", "999"]),
    "action, bad event file": Row("action", 2, "cannot read the event file",
                                  arrange=lambda w: setattr(w, "event", None)),
    "serve, bad port": Row("serve", 2, "--port 0 is not a port", ["--port", "0"]),
    "worker, bad setting": Row("worker", 2, "DECODE_WORKERS=0 leaves decode worker nothing to do",
                               env={"DECODE_WORKERS": "0"}),
    "eval, bad task file": Row("eval", 2, "nope.jsonl", ["{tmp}/nope.jsonl"]),
    "check, bad setting": Row("check", 2, "SANDBOX_MODE='nope' is not valid", ["--repo", "{repo}"],
                              env={"SANDBOX_MODE": "nope"}),
    **{f"{door}, no Modal token": Row(door.split()[0], 2, MODAL_SAYS, argv, env=NO_MODAL, arrange=arrange,
                                      check=check)
       for door, argv, arrange, check in (
           ("run local", LOCAL, None, nothing_cloned), ("run owner/name", ON_GITHUB, None, nothing_cloned),
           ("action", [], None, nothing_cloned), ("serve", ["--port", "{port}"], None, None),
           ("worker", [], None, None), ("eval", EVAL, tasks(NOTE), nothing_cloned))},
    **{f"{door}, Docker engine down": Row(door.split()[0], 2, DOCKER_SAYS, argv, env=NO_DOCKER, arrange=arrange,
                                          check=check)
       for door, argv, arrange, check in (
           ("run local", LOCAL, None, nothing_cloned), ("run owner/name", ON_GITHUB, None, nothing_cloned),
           ("check", ["--repo", "{repo}"], None, None), ("eval", EVAL, tasks(NOTE), nothing_cloned))},
    # 3: a budget cap, the work so far committed
    "run local, cap": Row("run", 3, "stopped at the turn limit", LOCAL, env=ONE_TURN, arrange=turns(EDIT_TWICE),
                          check=local_branch("partial")),
    "run owner/name, cap": Row("run", 3, "stopped at the turn limit", ON_GITHUB, env=ONE_TURN,
                               arrange=turns(EDIT_TWICE), check=pull(True)),
    "action, cap": Row("action", 3, "", env=ONE_TURN, arrange=turns(EDIT_TWICE),
                       check=both(pull(True), action_conclusion("incomplete"))),
    # 3: a budget cap before any change: the run's status in every door, though nothing is committed
    "run local, cap before any change": Row("run", 3, "stopped at the turn limit", LOCAL, env=ONE_TURN,
                                            arrange=turns(LOOK_TWICE), check=no_branch),
    "run owner/name, cap before any change": Row("run", 3, "stopped at the turn limit", ON_GITHUB, env=ONE_TURN,
                                                 arrange=turns(LOOK_TWICE), check=no_pull),
    # 3: the sandbox kept dying, the work so far committed
    "run local, sandbox kept dying": Row("run", 3, "more than DECODE_MAX_RESTARTS=0 allows", LOCAL, env=DIES,
                                         arrange=turns(EDIT_THEN_DIE), check=local_branch("partial")),
    "run owner/name, sandbox kept dying": Row("run", 3, "more than DECODE_MAX_RESTARTS=0 allows", ON_GITHUB,
                                              env=DIES, arrange=turns(EDIT_THEN_DIE), check=pull(True)),
    "action, sandbox kept dying": Row("action", 3, "", env=DIES, arrange=turns(EDIT_THEN_DIE),
                                      check=both(pull(True), action_conclusion("incomplete"))),
    # 130: interrupted (Ctrl-C), the work so far committed
    "run local, interrupted": Row("run", 130, "decode: interrupted", LOCAL, arrange=turns(EDIT_THEN_SLEEP),
                                  check=local_branch("partial"), **INTERRUPTED),
    "run owner/name, interrupted": Row("run", 130, "interrupted", ON_GITHUB, arrange=turns(EDIT_THEN_SLEEP),
                                       check=pull(True), **INTERRUPTED),
    "action, interrupted": Row("action", 130, "", arrange=turns(EDIT_THEN_SLEEP), check=pull(True), **INTERRUPTED),
    "eval, interrupted": Row("eval", 130, "interrupted", EVAL, arrange=tasks(EDIT_THEN_SLEEP), **INTERRUPTED),
    "serve, interrupted": Row("serve", 130, "", ["--port", "{port}"], until=healthy, signum=signal.SIGINT),
    "worker, interrupted": Row("worker", 130, "worker pool stopped", until=logged("worker running"),
                               signum=signal.SIGINT),
}


@pytest.mark.parametrize("row", [pytest.param(row, id=name) for name, row in TABLE.items()])
def test_exit_status(world: World, row: Row):  # noqa: F811
    exercise(world, row)
