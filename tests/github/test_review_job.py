"""A whole review as one run, end to end: GitHub's example `pull_request_review.submitted` payload rewritten to
the fake repository, PyGithub against the fake GitHub, the real anthropic SDK against the fake Messages API,
and a local sandbox. One run, commits on the pull request's branch, one reply in each thread."""

from __future__ import annotations

import json

import pytest

from tests.support.github_job import NAME, OWNER, delivery, edit_turns, run, world  # noqa: F401 (fixture)

COMMENTS = [
    {"body": "Rename `is_weekend` to `is_rest_day`.", "path": "calendar_utils.py", "line": 7,
     "diff_hunk": "@@ -5,3 +5,3 @@\n def is_weekend(day):"},
    {"body": "Add a test for Sunday.", "path": "test_calendar.py", "line": 3, "diff_hunk": "@@ -1,3 +1,3 @@\n import"},
    {"body": "Mention it in the README.", "path": "README.md", "line": 1, "diff_hunk": "@@ -1 +1 @@\n # calendar"},
]
BOT = "github-actions[bot]"  # whom the fake's token acts as: decode-bot's login in token mode


def open_pull(fake, branch: str, user: str) -> int:
    fake.push_branch(OWNER, NAME, branch, {"feature.txt": "wip\n"})
    return fake.add_pull(OWNER, NAME, "Feature", "A feature.", head_branch=branch, base_branch="main", user=user)


def submitted(fake, number: int, body: str | None, *, state: str = "COMMENTED", user: str = "alice",
              comments: list[dict] = COMMENTS) -> tuple[dict, list[int]]:
    """A review added to the fake, and the payload GitHub sends when it is submitted."""
    rid, cids = fake.add_review(OWNER, NAME, number, body, user=user, state=state, comments=comments)
    pr = fake.pull(OWNER, NAME, number)
    payload = delivery("pull_request_review", "submitted", sender=user, pull_request__number=number,
                       pull_request__head={**pr["head"]}, pull_request__base={**pr["base"]},
                       pull_request__user={**pr["user"]}, review__id=rid, review__body=body,
                       review__state=state.lower())
    return payload, cids


def replies(fake, number: int, cids: list[int]) -> dict[int, list[str]]:
    """Our replies in each thread, by the thread's first comment."""
    found: dict[int, list[str]] = {cid: [] for cid in cids}
    for c in fake.review_comments_on(OWNER, NAME, number):
        if c.get("in_reply_to_id") in found and c["user"]["login"] == BOT:
            found[c["in_reply_to_id"]].append(c["body"])
    return found


def test_a_three_comment_review_is_one_run_with_a_reply_in_each_thread_naming_the_commit(world):
    fake, anthropic, *_ = world
    number = open_pull(fake, "feature", "alice")
    payload, cids = submitted(fake, number, "/decode please address these")
    anthropic.script(edit_turns("review addressed"))
    conclusion = run(world, "pull_request_review", payload)
    assert conclusion.state == "success", conclusion.message
    assert len(anthropic.requests) == 2  # one run: a tool call, then the answer
    first = json.dumps(anthropic.requests[0].body["messages"][0])
    for c in COMMENTS:
        assert json.dumps(c["body"])[1:-1] in first and c["path"] in first and f"line {c['line']}" in first
    assert "please address these" in first and first.count("<untrusted") >= 10
    sha = fake.branch_sha(OWNER, NAME, "feature")
    assert fake.file(OWNER, NAME, "feature", "NOTES.md") == "review addressed\n"
    answered = replies(fake, number, cids)
    assert all(len(r) == 1 and sha in r[0] and "`feature`" in r[0] for r in answered.values()), answered
    assert len(fake.pulls(OWNER, NAME)) == 1 and "Pushed" in fake.comments(OWNER, NAME, number)[-1]["body"]


def test_a_retried_job_does_not_reply_twice_even_when_an_answer_was_lost(world):
    fake, anthropic, *_ = world
    number = open_pull(fake, "feature", "alice")
    payload, cids = submitted(fake, number, "/decode go")
    fake.inject("POST", r"/comments/\d+/replies$", status=502, apply=True)  # made, but the answer is lost
    anthropic.script(edit_turns("first"))
    assert run(world, "pull_request_review", payload, run_id="r1").state == "success"
    anthropic.script(edit_turns("again"))
    assert run(world, "pull_request_review", payload, run_id="r1").state == "success"  # the job, retried
    answered = replies(fake, number, cids)
    assert all(len(r) == 1 and "decode-bot:review-reply:" in r[0] for r in answered.values()), answered
    posted = [r.status for r in fake.calls("POST", r"/replies$")]
    assert sorted(posted) == [201, 201, 502]  # the lost answer was looked for on the next attempt, not re-posted


def test_a_run_without_a_commit_says_why_in_each_thread(world):
    fake, anthropic, *_ = world
    number = open_pull(fake, "feature", "alice")
    payload, cids = submitted(fake, number, "/decode", comments=COMMENTS[:2])
    anthropic.script([[{"type": "text", "text": "The names are already right."}]])
    assert run(world, "pull_request_review", payload).state == "no_changes"
    for [reply] in replies(fake, number, cids).values():
        assert "made no changes" in reply and "Nothing was pushed" in reply and "already right" in reply


def test_changes_requested_on_a_decode_bot_pull_request_starts_a_run_where_decode_yml_says_so(world):
    fake, anthropic, *_ = world
    fake.push_branch(OWNER, NAME, "main", {".github/decode.yml": "review_trigger: changes_requested\n"})
    number = open_pull(fake, "decode/issue-1-weekend", BOT)
    payload, cids = submitted(fake, number, "Please rework this.", state="CHANGES_REQUESTED")
    anthropic.script(edit_turns("reworked"))
    conclusion = run(world, "pull_request_review", payload)
    assert conclusion.state == "success", conclusion.message
    assert "Please rework this." in json.dumps(anthropic.requests[0].body["messages"][0])
    sha = fake.branch_sha(OWNER, NAME, "decode/issue-1-weekend")
    assert all(len(r) == 1 and sha in r[0] for r in replies(fake, number, cids).values())


@pytest.mark.parametrize("config,author,reviewer", [
    (None, BOT, "alice"),  # no decode.yml on the base branch
    ("setup: []\n", BOT, "alice"),  # the base branch's decode.yml does not ask for it
    ("review_trigger: changes_requested\n", "alice", "alice"),  # a decode/ branch, but not decode-bot's PR
    ("review_trigger: changes_requested\n", BOT, "rita"),  # a reader's review
])
def test_changes_requested_starts_nothing_otherwise_and_says_nothing(world, config, author, reviewer):
    fake, anthropic, *_ = world
    if config is not None:
        fake.push_branch(OWNER, NAME, "main", {".github/decode.yml": config})
    number = open_pull(fake, "decode/issue-1-weekend", author)
    before = fake.branch_sha(OWNER, NAME, "decode/issue-1-weekend")
    payload, cids = submitted(fake, number, "Please rework this.", state="CHANGES_REQUESTED", user=reviewer)
    assert run(world, "pull_request_review", payload).state == "skipped"
    assert not anthropic.requests and not fake.comments(OWNER, NAME, number)
    assert not any(replies(fake, number, cids).values())
    assert fake.branch_sha(OWNER, NAME, "decode/issue-1-weekend") == before


def test_a_bad_review_trigger_is_an_error_naming_the_key(world):
    fake, anthropic, *_ = world
    fake.push_branch(OWNER, NAME, "main", {".github/decode.yml": "review_trigger: approved\n"})
    number = open_pull(fake, "decode/issue-1-weekend", BOT)
    payload, _ = submitted(fake, number, "Rework.", state="CHANGES_REQUESTED")
    conclusion = run(world, "pull_request_review", payload)
    assert conclusion.state == "failed" and "'review_trigger' must be changes_requested" in conclusion.message
    assert not anthropic.requests


def test_a_run_that_cannot_start_says_why_in_each_thread(world):
    fake, anthropic, *_ = world
    fake.push_branch(OWNER, NAME, "main", {".github/decode.yml": "netwrk: true\n"})
    number = open_pull(fake, "feature", "alice")
    payload, cids = submitted(fake, number, "/decode go", comments=COMMENTS[:1])
    anthropic.script(edit_turns("never"))
    assert run(world, "pull_request_review", payload).state == "failed"
    [[reply]] = replies(fake, number, cids).values()
    assert "could not finish" in reply and "unknown key 'netwrk'" in reply and fake.token not in reply
