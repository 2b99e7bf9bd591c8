"""`plan` for a whole review: one task holding every comment fenced, the pull request's own delivery, and the
threads to answer. Pure: no network, no git, no sandbox."""

from __future__ import annotations

import pytest

from bot.github.info import ReviewCommentInfo
from bot.github.plan import Facts, PushToPull, Threads, ToFork, plan
from bot.github.work import Review
from tests.github.test_plan import ALICE, FORK_PULL, OWN_PULL, PR_AS_ISSUE, REPO

COMMENTS = (
    ReviewCommentInfo(11, 11, "alice", "Rename `x`.", "calendar_utils.py", 7, "@@ -5,3 +5,3 @@\n def is_weekend"),
    ReviewCommentInfo(12, 12, "alice", "<!-- hidden -->Add a test.", "tests/test_cal.py", None, None),
    ReviewCommentInfo(13, 11, "alice", "And the docstring.", "calendar_utils.py", 8, "@@ -5 +5 @@"),  # a reply in 11
)


def review(**kw) -> Review:
    return Review(number=9, review_id=55, instructions=kw.pop("instructions", "please address these"), **ALICE, **kw)


def test_a_review_on_the_repositorys_pull_request_pushes_to_its_branch_and_answers_each_thread_once():
    p = plan(review(), Facts(REPO, PR_AS_ISSUE, OWN_PULL, COMMENTS), tag="cli:r1", sandbox_mode="docker")
    assert (p.branch, p.base, p.config_base) == ("fast-parse", "fast-parse", "release")
    assert p.delivery == PushToPull(9)
    assert p.threads == Threads(9, 55, (11, 12))  # the reply to 11 is answered in 11's thread


def test_the_task_lists_every_comment_with_its_file_line_and_hunk_fenced():
    task = plan(review(), Facts(REPO, PR_AS_ISSUE, OWN_PULL, COMMENTS), tag="cli:r1", sandbox_mode="docker").task
    assert "address every comment of the review (3 below)" in task
    for i, text in enumerate(("Rename `x`.", "Add a test.", "And the docstring."), 1):
        assert f"Review comment {i} of 3" in task and text in task
    assert "line 7" in task and "line 8" in task and "def is_weekend" in task and "tests/test_cal.py" in task
    assert "hidden" not in task
    assert task.count("<untrusted") >= 3 * 3 + 1  # each comment's path, hunk or body, and the instructions
    assert task.index("Rename") < task.index("Add a test") < task.index("docstring") < task.index("please address")


def test_a_review_without_instructions_asks_for_what_the_comments_say():
    facts = Facts(REPO, PR_AS_ISSUE, OWN_PULL, COMMENTS)
    task = plan(review(instructions=""), facts, tag="cli:r1", sandbox_mode="docker").task
    assert "do what the review comments above ask" in task


def test_a_review_on_a_fork_goes_to_the_fork():
    p = plan(review(), Facts(REPO, PR_AS_ISSUE, FORK_PULL, COMMENTS[:1]), tag="cli:r1", sandbox_mode="docker")
    assert p.delivery == ToFork(FORK_PULL) and p.base == "refs/pull/9/head"
    assert p.threads == Threads(9, 55, (11,))


def test_a_review_needs_its_pull_request():
    with pytest.raises(ValueError, match="pull request #9"):
        plan(review(), Facts(REPO, PR_AS_ISSUE), tag="cli:r1", sandbox_mode="docker")
