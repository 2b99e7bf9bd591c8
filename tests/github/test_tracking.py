"""The live tracking comment: phases edit at once, progress at most every 10 s, a failed edit never fails."""

from __future__ import annotations

from bot.github.tracking import INTERVAL_S, Tracker
from tests.support.forge import MemoryForge


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def started(forge: MemoryForge, clock: Clock) -> Tracker:
    tracker = Tracker(forge, "octo/calendar", None, footer="<!-- tag -->", clock=clock)
    tracker.start(7, "<!-- tag -->")
    return tracker


def turn(n: int, cost: float = 0.01) -> dict:
    return {"type": "model_response", "turn": n, "cost_usd": cost}


def test_the_comment_is_posted_with_the_checklist_and_each_phase_edits_it_at_once():
    forge, clock = MemoryForge(), Clock()
    tracker = started(forge, clock)
    assert len(forge.comments) == 1 and "⏳ **Preparing the workspace**" in forge.comments[0].body
    assert "⬜ Starting the sandbox" in forge.comments[0].body and "<!-- tag -->" in forge.comments[0].body
    for phase in ("sandbox", "setup", "agent"):
        tracker.on_event({"type": "phase", "name": phase})
    assert len(forge.edits) == 3  # no waiting between phase changes
    body = forge.comments[0].body
    assert "✅ Preparing the workspace" in body and "✅ Running setup" in body and "⏳ **Agent at work**" in body
    assert "Verifying" not in body  # a phase the run does not have is not listed


def test_agent_progress_is_throttled_to_one_edit_per_interval():
    forge, clock = MemoryForge(), Clock()
    tracker = started(forge, clock)
    tracker.on_event({"type": "phase", "name": "agent"})
    edits = len(forge.edits)
    for n in range(1, 30):  # 29 turns in 2.9 s
        clock.now += 0.1
        tracker.on_event(turn(n))
        tracker.on_event({"type": "tool_call", "name": "bash", "input": {"command": f"pytest -q -k t{n}"}})
    assert len(forge.edits) == edits  # the phase edit was < 10 s ago
    clock.now += INTERVAL_S
    tracker.on_event(turn(30))
    assert len(forge.edits) == edits + 1
    body = forge.comments[0].body
    assert "turn 30" in body and "last: `bash: pytest -q -k t29`" in body and "$0.30" in body


def test_a_failed_edit_is_logged_and_the_run_goes_on(caplog):
    forge, clock = MemoryForge(), Clock()
    tracker = started(forge, clock)
    forge.refuse("edit_comment", 502)
    tracker.on_event({"type": "phase", "name": "sandbox"})
    tracker.finish("✅ Opened the pull request.")
    assert "could not edit the tracking comment" in caplog.text
    forge.refusals.clear()
    tracker.finish("✅ Opened the pull request.")  # the next edit brings the comment up to date
    assert forge.comments[0].body == "✅ Opened the pull request.\n\n<!-- tag -->"


def test_a_retried_job_edits_the_comment_it_posted_before():
    forge, clock = MemoryForge(), Clock()
    first = started(forge, clock)
    again = Tracker(forge, "octo/calendar", first.comment_id, footer="<!-- tag -->", heading="👀 (attempt 2)",
                    clock=clock)
    again.start(7, "<!-- tag -->")
    assert len(forge.comments) == 1 and forge.comments[0].body.startswith("👀 (attempt 2)")


def test_a_tool_call_with_backticks_cannot_break_out_of_its_code_span():
    forge, clock = MemoryForge(), Clock()
    tracker = started(forge, clock)
    tracker.on_event({"type": "phase", "name": "agent"})
    clock.now += INTERVAL_S
    tracker.on_event({"type": "tool_call", "name": "bash", "input": {"command": "echo `@octocat` fixes #1"}})
    clock.now += INTERVAL_S
    tracker.on_event(turn(1))
    assert "last: `bash: echo '@octocat' fixes #1`" in forge.comments[0].body


def test_a_long_answer_streaming_is_the_last_action():
    forge, clock = MemoryForge(), Clock()
    tracker = started(forge, clock)
    tracker.on_event({"type": "phase", "name": "agent"})
    tracker.on_event(turn(1))
    clock.now += INTERVAL_S
    tracker.on_event({"type": "model_progress", "turn": 2, "phase": "thinking", "tokens": 1204})
    assert "turn 1 · last: thinking… 1,204 tokens" in forge.comments[0].body


def test_a_sandbox_restart_is_said_at_once_and_counted():
    forge, clock = MemoryForge(), Clock()
    tracker = started(forge, clock)
    tracker.on_event({"type": "phase", "name": "agent"})
    tracker.on_event(turn(1))
    edits = len(forge.edits)
    tracker.on_event({"type": "sandbox_restart", "reason": "the container was stopped from outside "
                      "(exit status 137 / signal 9)", "restart": 1, "max_restarts": 2})
    assert len(forge.edits) == edits + 1, "not held back by the interval"
    body = forge.comments[0].body
    assert "sandbox restarted 1x" in body
    assert "last: the sandbox died (the container was stopped from outside (exit status 137 / signal 9)); a new " \
           "one carries on" in body


def test_an_mcp_server_the_run_goes_on_without_is_named_once_at_once_and_in_the_final_comment():
    forge, clock = MemoryForge(), Clock()
    tracker = started(forge, clock)
    tracker.on_event({"type": "phase", "name": "agent"})
    tracker.on_event({"type": "mcp_server", "name": "time", "state": "started", "tools": ["get_current_time"]})
    edits = len(forge.edits)
    tracker.on_event({"type": "mcp_server", "name": "git", "state": "down",
                      "reason": "did not start: it exited with status 1 (No module named `mcp_server_git`)"})
    assert len(forge.edits) == edits + 1, "not held back by the interval"
    line = ("⚠️ MCP server `git` did not start: it exited with status 1 (No module named `mcp_server_git`); the run "
            "goes on without it")
    assert forge.comments[0].body.count(line) == 1 and "`time`" not in forge.comments[0].body
    tracker.finish("✅ Done.")
    assert forge.comments[0].body.startswith("✅ Done.") and forge.comments[0].body.count(line) == 1
