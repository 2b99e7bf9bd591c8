"""Every cap ends a run the same way on every backend (issue 33): the real `decode run`, a scripted agent that
edits a file and then meets the cap. The agent stops at once, the edit is committed on the run branch as
incomplete, the exit status is 3, the transcript holds exactly one `run_end`, the reason is said once (the
last line of stderr), and nothing waits on a dead sandbox.

The disk cap is polled on the host's workspace (local, bwrap, docker); Modal's workspace is remote and its
disk is Modal's own (docs/sandboxes.md), so the modal double has no disk row. The memory cap is a cgroup's
(bwrap, docker): local has none, and Modal reports no out-of-memory kill apart from an exit status, so neither
has a memory row. A write past the disk cap that the agent answers right after, before the poller looks,
still ends at the cap (`test_a_write_past_the_disk_cap_ends_at_the_cap_however_soon_the_agent_answers`).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from bot.agent.loop import STOP_MESSAGES
from tests.conftest import git
from tests.sandbox.conftest import require
from tests.support.cli import buggy_repo, decode_run, printed  # noqa: F401 (fixture)

EDIT = {"type": "tool_use", "name": "bash", "input": {"command": "echo partial >> NOTES.md"}}
CAPS = {  # cap: (its setting, the agent's second call, the stop reason)
    "turns": ({"DECODE_MAX_TURNS": "2"}, "echo more >> NOTES.md", "max_turns"),
    "cost": ({"DECODE_MAX_COST_USD": "0.000001"}, "echo never >> NOTES.md", "max_cost"),
    "time": ({"DECODE_TIMEOUT_MINUTES": "0.25"}, "sleep 120", "wall_clock"),
    "disk": ({"DECODE_MAX_DISK_MB": "8"}, "head -c 30000000 /dev/zero > big.bin; sleep 60", "max_disk"),
    "memory": ({"DECODE_MAX_MEMORY_MB": "64"}, "python3 -c 'x = bytearray(300 * 2**20)' && sleep 60", "max_memory"),
}
BACKENDS = {"local": (), "bwrap": pytest.mark.bwrap, "docker": pytest.mark.docker, "modal": pytest.mark.bwrap}
WITHOUT = {("disk", "modal"), ("memory", "local"), ("memory", "modal")}  # see the module docstring
ROWS = [pytest.param(cap, mode, id=f"{cap}-{mode}", marks=BACKENDS[mode])
        for cap in CAPS for mode in BACKENDS if (cap, mode) not in WITHOUT]


@pytest.mark.parametrize("cap,mode", ROWS)
def test_a_cap_stops_the_agent_and_commits_its_work(fake_anthropic, tmp_path: Path, buggy_repo: Path,  # noqa: F811
                                                     cap: str, mode: str) -> None:
    require(mode)
    env, second, reason = CAPS[cap]
    fake_anthropic.script([[EDIT], [{"type": "tool_use", "name": "bash", "input": {"command": second}}],
                           [EDIT], [{"type": "text", "text": "Never reached."}]])
    began = time.monotonic()
    res = decode_run(fake_anthropic, tmp_path, buggy_repo, "Take notes", mode, **env)
    took = time.monotonic() - began
    out = res.stdout + res.stderr
    assert res.returncode == 3, out
    assert "Traceback" not in out
    assert printed(res.stdout, "result") == reason
    assert git(buggy_repo, "show", f"{printed(res.stdout, 'branch')}:NOTES.md").startswith("partial"), out
    message = (git(buggy_repo, "log", "-1", "--format=%s", printed(res.stdout, "branch")))
    assert message.startswith(f"decode (incomplete: {reason})"), message
    events = ended_once(tmp_path, res.stderr, reason)
    assert not [e for e in events if e["type"] == "sandbox_restart"], "a cap is not a death to restart from"
    assert len(fake_anthropic.requests) <= 2, "the agent went on after the cap"
    assert took < 180, f"{took:.0f} s: something waited on a dead sandbox (it used to be 600 s)"
    last_call = max(e["t"] for e in events if e["type"] == "tool_call")  # the cost cap ends the run after turn 1
    [end] = [e["t"] for e in events if e["type"] == "run_end"]
    if cap != "time":  # the time cap's `sleep` is cut at what is left of the 15 s: not a wait on the sandbox
        assert end - last_call < 30, f"{end - last_call:.0f} s from the capped call to the end: not at once"


def ended_once(tmp_path: Path, stderr: str, reason: str) -> list[dict]:
    """The run's transcript events, once it is checked that they hold one `run_end`, for `reason`, and that
    the reason is said once, as the last line of `stderr`."""
    [run] = (tmp_path / "data" / "runs").iterdir()
    events = [json.loads(line) for line in (run / "transcript.jsonl").read_text().splitlines()]
    assert [e["stop_reason"] for e in events if e["type"] == "run_end"] == [reason]
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("decode: ") and STOP_MESSAGES[reason] in lines[-1], stderr
    assert sum(STOP_MESSAGES[reason] in line for line in lines) == 1, stderr
    return events


def test_a_write_past_the_disk_cap_ends_at_the_cap_however_soon_the_agent_answers(
        fake_anthropic, tmp_path: Path, buggy_repo: Path) -> None:  # noqa: F811
    """The agent writes past the cap and answers at once, before the 0.5 s poll: the answer is not accepted."""
    write = {"type": "tool_use", "name": "bash", "input": {"command": "head -c 12000000 /dev/zero > big.bin"}}
    fake_anthropic.script([[write], [{"type": "text", "text": "Done."}]])
    res = decode_run(fake_anthropic, tmp_path, buggy_repo, "Write a big file", DECODE_MAX_DISK_MB="8")
    assert res.returncode == 3, res.stdout + res.stderr
    assert printed(res.stdout, "result") == "max_disk"
    ended_once(tmp_path, res.stderr, "max_disk")
