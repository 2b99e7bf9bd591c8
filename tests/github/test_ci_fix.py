"""CI follow-up: a failed check suite on a decode-bot PR starts one fix round on its branch, from GitHub's own
check_suite payload, the fake GitHub's check runs and job logs, and the fake Messages API."""

from __future__ import annotations

import json

from bot.github.triggers import Ignore, Router, Rules
from bot.github.work import CheckSuite
from tests.fakes.github_checks import add_check_run
from tests.fakes.webhook_examples import example
from tests.support.github_job import NAME, OWNER, REPO, delivery, edit_turns, run, world  # noqa: F401 (fixture)

def suite(fake, number: int, head_sha: str, branch: str, conclusion: str = "failure") -> dict:
    """GitHub's check_suite.completed example, for `head_sha` on pull request `number` of the fake repository."""
    payload = example("check_suite", "completed", repo=REPO, sender="github-actions[bot]", sender_type="Bot")
    repo_id = payload["repository"]["id"]
    payload["check_suite"].update(conclusion=conclusion, head_sha=head_sha, head_branch=branch, pull_requests=[{
        "number": number, "head": {"ref": branch, "sha": head_sha, "repo": {"id": repo_id}},
        "base": {"ref": "main", "sha": fake.branch_sha(OWNER, NAME, "main"), "repo": {"id": repo_id}}}])
    return payload


def decode_pull(world, rounds: int = 2) -> tuple[int, str]:
    """A pull request decode-bot opened for a labeled issue, with `ci_fix: {rounds: N}` on the base branch:
    its number and branch."""
    fake, anthropic, *_ = world
    fake.push_branch(OWNER, NAME, "main", {".github/decode.yml": f"ci_fix: {{rounds: {rounds}}}\n"})
    number = fake.add_issue(OWNER, NAME, "Take notes", "Write notes.", user="alice")
    anthropic.script(edit_turns("first"))
    assert run(world, "issues", delivery("issues", "labeled", issue__number=number, label__name="agent"),
               run_id="job-1").state == "success"
    [pr] = fake.pulls(OWNER, NAME)
    return pr["number"], pr["head"]["ref"]


def test_a_failed_suite_gets_one_fix_commit_and_a_passing_one_starts_nothing(world):
    fake, anthropic, *_ = world
    number, branch = decode_pull(world)
    head = fake.branch_sha(OWNER, NAME, branch)
    add_check_run(fake, OWNER, NAME, head, "tests", "failure", title="1 failed",
                  log="test_notes.py::test_second FAILED\nAssertionError: NOTES.md lacks 'second'\n")
    add_check_run(fake, OWNER, NAME, head, "lint", "success")
    work = Router(Rules()).decide("check_suite", suite(fake, number, head, branch))
    assert work == CheckSuite(repo=REPO, number=number, head_sha=head, sender_login="github-actions[bot]")
    asked = len(anthropic.requests)
    anthropic.script(edit_turns("second"))
    conclusion = run(world, "check_suite", suite(fake, number, head, branch), run_id="job-2")
    assert conclusion.state == "success", conclusion.message
    task = json.dumps(anthropic.requests[asked].body["messages"][0])
    assert "NOTES.md lacks 'second'" in task and "round 1 of 2" in task and "<untrusted" in task
    assert "lint" not in task  # only the failing checks
    fixed = fake.branch_sha(OWNER, NAME, branch)
    assert fixed != head and fake.file(OWNER, NAME, branch, "NOTES.md") == "first\nsecond\n"
    assert fake.commit_message(OWNER, NAME, fixed).startswith("decode: Fix the failing checks (round 1 of 2)")
    assert len(fake.pulls(OWNER, NAME)) == 1
    tracking = [c["body"] for c in fake.comments(OWNER, NAME, number) if "fixing the failing checks" in c["body"]
                or "Pushed" in c["body"]]
    assert tracking and "Pushed" in tracking[-1]
    passed = Router(Rules()).decide("check_suite", suite(fake, number, fixed, branch, conclusion="success"))
    assert isinstance(passed, Ignore) and "not a failure" in passed.reason


def test_no_round_after_a_person_pushed_and_none_past_the_rounds(world):
    fake, anthropic, *_ = world
    number, branch = decode_pull(world)
    human = fake.push_branch(OWNER, NAME, branch, {"mine.txt": "a person's fix\n"}, start=branch)
    add_check_run(fake, OWNER, NAME, human, "tests", "failure", log="still failing\n")
    asked = len(anthropic.requests)
    skipped = run(world, "check_suite", suite(fake, number, human, branch), run_id="job-2")
    assert skipped.state == "skipped" and "someone pushed" in skipped.message
    assert len(anthropic.requests) == asked and fake.branch_sha(OWNER, NAME, branch) == human


def test_the_rounds_end_with_one_note(world):
    fake, anthropic, *_ = world
    number, branch = decode_pull(world, rounds=1)
    head = fake.branch_sha(OWNER, NAME, branch)
    add_check_run(fake, OWNER, NAME, head, "tests", "failure", log="boom\n")
    anthropic.script(edit_turns("try"))
    assert run(world, "check_suite", suite(fake, number, head, branch), run_id="job-2").state == "success"
    again = fake.branch_sha(OWNER, NAME, branch)
    add_check_run(fake, OWNER, NAME, again, "tests", "failure", log="boom again\n")
    asked = len(anthropic.requests)
    for run_id in ("job-3", "job-4"):  # a redelivery, or a second App's suite: one note all the same
        stopped = run(world, "check_suite", suite(fake, number, again, branch), run_id=run_id)
        assert stopped.state == "skipped" and "used up" in stopped.message
    assert len(anthropic.requests) == asked
    notes = [c for c in fake.comments(OWNER, NAME, number) if "still fail after 1 CI-fix round" in c["body"]]
    assert len(notes) == 1
