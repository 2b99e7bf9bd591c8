"""Attempts on the App: decode.yml's `attempts: 3` on a labeled issue, through the fake GitHub and the fake
Anthropic API (one scripted session per attempt): one attempt fails `verify`, one passes with a large diff,
one with a small one. The small one is the pull request; its body lists all three; only its branch is pushed;
the tracking comment showed each attempt's progress while they ran."""

from __future__ import annotations

import json
import threading
import time

import pytest

from bot.github.triggers import Router, Rules
from bot.github.work import Comment, job_payload, work_of
from tests.github.test_verify_gate import FIX, TESTS, answer, labeled_issue
from tests.support.github_job import NAME, OWNER, delivery, run, world  # noqa: F401 (fixture)

WRONG = [{"type": "tool_use", "name": "edit", "input": {"path": "calendar_utils.py",
                                                       "old_string": "return day.weekday() > 5",
                                                       "new_string": "return day.weekday() > 6"}}]
NOISE = [{"type": "tool_use", "name": "bash", "input": {
    "command": "for i in $(seq 30); do echo \"# note $i\" >> calendar_utils.py; done"}}]
ATTEMPTS = [
    [WRONG, answer("Done."), answer("Still done."), answer("Done again.")],
    [NOISE, FIX, answer("Fixed is_weekend, with notes.")],
    [FIX, answer("Fixed is_weekend: Saturday is 5.")],
]


def test_three_attempts_on_the_app_publish_the_small_one_and_list_all_three(world):
    fake, anthropic, *_ = world
    anthropic.sessions([("Saturdays count as workdays", turns) for turns in ATTEMPTS])
    conclusion, number = labeled_issue(world, f"attempts: 3\nverify_rounds: 1\nverify:\n  - {TESTS}\n")
    assert conclusion.state == "success", conclusion.message
    [pr] = fake.pulls(OWNER, NAME)
    assert not pr["draft"]
    body = pr["body"]
    assert "**Attempts** (3; published: attempt " in body and "it passed `verify`, with the fewest changed lines" \
        in body
    rows = [line.split("|") for line in body.splitlines() if line.startswith("| ") and "transcript.md" in line]
    assert sorted(row[2].strip() for row in rows) == ["failed", "passed", "passed"], body  # in arrival order
    [published] = [row for row in rows if "(published)" in row[1]]
    assert (published[2].strip(), published[3].strip()) == ("passed", "2")
    assert [int(row[3]) > 30 for row in rows if row[2].strip() == "passed" and row is not published] == [True]
    assert "+1 −1" in body  # the published diff is the small one
    pushed = {c.body.get("ref") for c in fake.calls("POST", r"/git/refs$") if isinstance(c.body, dict)}
    assert len(pushed) <= 1  # the other attempts' branches are not pushed
    edits = [c.body["body"] for c in fake.calls("PATCH", r"/issues/comments/\d+$") if isinstance(c.body, dict)]
    assert any("attempt 1:" in e and "attempt 2:" in e and "attempt 3:" in e for e in edits), edits[-3:]
    assert "**Attempts** (3; published: attempt " in fake.comments(OWNER, NAME, number)[0]["body"]


@pytest.mark.parametrize("body, instructions, attempts", [
    ("/decode attempts=3 fix the weekend check", "fix the weekend check", "3"),
    ("/decode ATTEMPTS=2\nand add a test", "and add a test", "2"),
    ("/decode fix it with attempts=3", "fix it with attempts=3", None),  # only as the first word
    ("/decode attempts=x fix", "fix", "x"),  # checked by the job, which says what to fix
])
def test_a_comment_command_carries_its_attempts_and_the_task_loses_them(body, instructions, attempts):
    payload = delivery("issue_comment", "created", comment__body=body)
    work = Router(Rules()).decide("issue_comment", payload)
    assert isinstance(work, Comment) and (work.instructions, work.attempts) == (instructions, attempts)
    assert work_of(job_payload(work, "issue_comment", "d1")) == work  # the queue keeps it


def test_a_bad_attempts_count_in_a_command_fails_in_one_line_before_any_run(world):
    fake, anthropic, *_ = world
    number = fake.add_issue(OWNER, NAME, "Weekend check is wrong", "Saturdays count as workdays.", user="alice")
    comment_id = fake.add_comment(OWNER, NAME, number, "/decode attempts=9 fix it", user="alice")
    conclusion = run(world, "issue_comment", delivery("issue_comment", "created", issue__number=number,
                                                      comment__id=comment_id, comment__body="/decode attempts=9 fix it"))
    assert conclusion.state == "failed" and not anthropic.requests
    assert "attempts=9: the count must be a whole number from 1 to 5" in conclusion.message
    assert "attempts=9: the count must be a whole number from 1 to 5" in fake.comments(OWNER, NAME, number)[-1]["body"]


def test_attempts_the_runs_budget_leaves_nothing_for_are_said_in_the_body_and_the_tracking_comment(world, tmp_path):
    """DECODE_MAX_COST_USD=0.001 for three attempts: the first to set up pays more than that for its first turn;
    the other two, held in setup until that turn is paid, never ask the model, and the pull request's list and the
    tracking comment's lines say they did not start for lack of budget."""
    fake, anthropic, *_ = world
    gate = tmp_path / "gate"
    gate.mkdir()

    def open_gate() -> None:  # once a turn is paid: the loop pays before it records the answer
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any(
                "model_response" in p.read_text() for p in (tmp_path / "data" / "runs").glob("*/transcript.jsonl")):
            time.sleep(0.05)
        (gate / "go").touch()

    anthropic.sessions([("Saturdays count as workdays", turns) for turns in ATTEMPTS])
    hold = f"mkdir {gate}/first 2>/dev/null || while [ ! -e {gate}/go ]; do sleep 0.05; done"
    fake.push_branch(OWNER, NAME, "main", {".github/decode.yml": f"attempts: 3\nsetup:\n  - {json.dumps(hold)}\n"})
    number = fake.add_issue(OWNER, NAME, "Weekend check is wrong", "Saturdays count as workdays.", user="alice")
    opener = threading.Thread(target=open_gate, daemon=True)
    opener.start()
    run(world, "issues", delivery("issues", "labeled", issue__number=number, label__name="agent"),
        max_cost_usd=0.001)
    opener.join(timeout=130)
    assert len(anthropic.requests) == 1  # the whole run paid for one turn
    spent = "the run's budget (DECODE_MAX_COST_USD=0.001) was spent"
    [pr] = fake.pulls(OWNER, NAME)
    rows = [line.split("|") for line in pr["body"].splitlines() if line.startswith("| ") and "transcript.md" in line]
    assert sorted(row[2].strip() for row in rows) == [f"not started: {spent}"] * 2 + [f"stopped: {spent}"], pr["body"]
    assert "(published)" in next(row[1] for row in rows if row[2].strip() == f"stopped: {spent}")
    edits = [c.body["body"] for c in fake.calls("PATCH", r"/issues/comments/\d+$") if isinstance(c.body, dict)]
    assert any(e.count(f": not started: {spent}") == 2 for e in edits), edits[-3:]
