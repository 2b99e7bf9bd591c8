"""The verification gate end to end: decode.yml's `verify` commands run in the sandbox after the agent's
answer, failures go back to the (scripted) model through the fake Messages API, and the result reaches
the pull request, the tracking comment, the transcript and the Action's `verified` output."""

from __future__ import annotations

import json
from pathlib import Path

from bot.action import finish
from bot.run.transcript import load_events
from tests.support.github_job import NAME, OWNER, delivery, run, world  # noqa: F401 (fixture)

TESTS = "python3 -m unittest -q"
FIX = [{"type": "tool_use", "name": "edit", "input": {"path": "calendar_utils.py",
                                                     "old_string": "return day.weekday() > 5",
                                                     "new_string": "return day.weekday() >= 5"}}]
NOTE = [{"type": "tool_use", "name": "bash", "input": {"command": "echo looked >> NOTES.md"}}]
FEEDBACK = "the harness ran the repository's `verify` commands"


def answer(text: str) -> list[dict]:
    return [{"type": "text", "text": text}]


def labeled_issue(world, decode_yml: str | None, extra: dict[str, str] | None = None):
    """Commit decode.yml (and `extra` files) on main, open an issue and run the job for its label."""
    fake = world[0]
    files = {**({".github/decode.yml": decode_yml} if decode_yml is not None else {}), **(extra or {})}
    if files:
        fake.push_branch(OWNER, NAME, "main", files)
    number = fake.add_issue(OWNER, NAME, "Weekend check is wrong", "Saturdays count as workdays.", user="alice")
    conclusion = run(world, "issues", delivery("issues", "labeled", issue__number=number, label__name="agent"))
    return conclusion, number


def outputs_of(conclusion, tmp_path: Path) -> dict[str, str]:
    """What the Action writes to GITHUB_OUTPUT for this conclusion."""
    path = tmp_path / "github-output"
    finish({"GITHUB_OUTPUT": str(path)}, conclusion)
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


def user_texts(request) -> list[str]:
    """The text of each user message of one Messages request (the last one comes as a block with a cache mark)."""
    texts = []
    for m in request.body["messages"]:
        if m["role"] == "user":
            blocks = [{"type": "text", "text": m["content"]}] if isinstance(m["content"], str) else m["content"]
            texts.append("".join(b.get("text", "") for b in blocks if b.get("type") == "text"))
    return texts


def test_a_failing_verify_goes_back_to_the_agent_and_passes_after_its_fix(world, tmp_path):
    fake, anthropic, *_ = world
    anthropic.script([answer("Looks fine to me."), FIX, answer("Fixed is_weekend: Saturday is 5.")])
    conclusion, number = labeled_issue(world, f"verify:\n  - {TESTS}\n")
    assert conclusion.state == "success", conclusion.message
    [_, second, _] = anthropic.requests
    [feedback] = [t for t in user_texts(second) if FEEDBACK in t]
    assert f"Command: `{TESTS}`" in feedback and "Result: exit code 1" in feedback
    fenced = feedback[feedback.index("<untrusted"):]
    assert "FAILED (failures=2)" in fenced and "test_saturday_and_sunday_are_weekend" in fenced
    [pr] = fake.pulls(OWNER, NAME)
    assert not pr["draft"]
    assert "**Verification** (✅ passed" in pr["body"] and f"- ✅ `{TESTS}` (" in pr["body"]
    assert "2 rounds, 1 sent back to the agent" in pr["body"]
    assert "**Verification** (✅ passed" in fake.comments(OWNER, NAME, number)[0]["body"]
    v = conclusion.ran.verification
    assert (v.verified, v.rounds, v.feedback) == ("passed", 2, 1)
    assert [(c.command, c.exit_code, c.timed_out) for c in v.checks] == [(TESTS, 0, False)]
    assert outputs_of(conclusion, tmp_path)["verified"] == "passed"
    events = load_events(conclusion.ran.transcript_jsonl)
    assert [(e["round"], e["exit_code"]) for e in events if e["type"] == "verify"] == [(1, 1), (2, 0)]
    assert {"name": "verifying"}.items() <= next(e for e in events if e.get("name") == "verifying").items()
    markdown = conclusion.ran.transcript_md.read_text()
    assert "**verify** (round 1, ❌ exit 1," in markdown and "**verify** (round 2, ✅ passed," in markdown


def test_a_verify_that_never_passes_ends_in_a_draft_that_says_so(world, tmp_path):
    fake, anthropic, *_ = world
    anthropic.script([NOTE, answer("Done."), answer("Still done."), answer("Really done.")])
    conclusion, number = labeled_issue(world, f"verify: {TESTS}\nverify_rounds: 2\n")
    assert (conclusion.state, conclusion.result.exit_code) == ("success", 0), conclusion.message
    assert len(anthropic.requests) == 4
    last = user_texts(anthropic.requests[-1])
    assert sum(FEEDBACK in t for t in last) == 2 and "This is the last round" in last[-1]
    [pr] = fake.pulls(OWNER, NAME)
    assert pr["draft"]
    assert "**Verification** (❌ failed" in pr["body"] and f"- ❌ `{TESTS}` (" in pr["body"]
    assert ": exit code 1" in pr["body"] and "3 rounds, 2 sent back to the agent" in pr["body"]
    tracking = fake.comments(OWNER, NAME, number)[0]["body"]
    assert "as a draft: its `verify:` commands from .github/decode.yml still fail" in tracking
    assert "**Verification** (❌ failed" in tracking
    v = conclusion.ran.verification
    assert (v.verified, v.rounds, v.feedback, v.stale) == ("failed", 3, 2, False)
    assert outputs_of(conclusion, tmp_path)["verified"] == "failed"


def test_without_verify_the_pull_request_says_nothing_was_verified(world, tmp_path):
    fake, anthropic, *_ = world
    anthropic.script([NOTE, answer("Noted.")])
    conclusion, number = labeled_issue(world, None)
    [pr] = fake.pulls(OWNER, NAME)
    assert not pr["draft"]
    assert "nothing was verified by the harness. Add `verify:` to .github/decode.yml" in pr["body"]
    assert conclusion.ran.verification.verified == "none"
    assert outputs_of(conclusion, tmp_path)["verified"] == "none"
    assert not [e for e in load_events(conclusion.ran.transcript_jsonl)
                if e["type"] == "verify" or e.get("name") == "verifying"]
    assert "nothing was verified by the harness" in fake.comments(OWNER, NAME, number)[0]["body"]


def test_a_secret_printed_by_the_repositorys_test_is_redacted_in_the_feedback_and_the_transcript(world):
    fake, anthropic, settings, *_ = world
    key = settings.model.api_key
    leak = f"import sys\nprint('the key is', {key[:5]!r} + {key[5:]!r})\nsys.exit(1)\n"  # no key in the file
    anthropic.script([NOTE, answer("Done."), answer("Done again.")])
    conclusion, _ = labeled_issue(world, "verify: [python3 leak.py]\nverify_rounds: 1\n", {"leak.py": leak})
    feedback = json.dumps(anthropic.requests[-1].body)
    assert "the key is [REDACTED" in feedback and key not in feedback
    jsonl = conclusion.ran.transcript_jsonl.read_text()
    assert key not in jsonl and key not in conclusion.ran.transcript_md.read_text()
    outputs = [e["output"] for e in load_events(conclusion.ran.transcript_jsonl) if e["type"] == "verify"]
    assert len(outputs) == 2 and all("the key is [REDACTED" in o for o in outputs)
    [pr] = fake.pulls(OWNER, NAME)
    assert key not in pr["body"] and pr["draft"]


def test_a_verify_command_gets_setup_timeout_and_a_timeout_counts_as_a_failure(world):
    fake, anthropic, *_ = world
    anthropic.script([NOTE, answer("Done."), answer("Done again.")])
    conclusion, _ = labeled_issue(world, "verify: [sleep 30]\nsetup_timeout: 1\nverify_rounds: 1\n")
    assert "Result: timed out after 1s" in user_texts(anthropic.requests[-1])[-1]
    [check] = conclusion.ran.verification.checks
    assert check.timed_out and check.exit_code is None and check.duration_s < 10
    [pr] = fake.pulls(OWNER, NAME)
    assert pr["draft"] and "- ❌ `sleep 30` (" in pr["body"] and ": timed out after 1s" in pr["body"]
