"""`plan`: which branch the agent starts from and lands on, whose decode.yml applies and how the work is
delivered, for every kind of trigger. Pure: no network, no git, no sandbox."""

from __future__ import annotations

import pytest

from bot.github.info import IssueInfo, PullInfo, RepoInfo
from bot.github.plan import Facts, OpenPull, PushToPull, ToFork, plan
from bot.github.work import Comment, Dispatch, Issue, ReviewComment

REPO = RepoInfo("octo/calendar", "main", "https://git.example/octo/calendar.git", "https://web.example/octo/calendar")
ISSUE = IssueInfo(7, "Weekend check is wrong", "Saturdays count.", "alice", False, "https://web.example/i/7")
PR_AS_ISSUE = IssueInfo(9, "Speed up parsing", "Faster.", "bob", True, "https://web.example/p/9")
OWN_PULL = PullInfo(9, "Speed up parsing", "Faster.", "fast-parse", "a" * 40, "octo/calendar", "release",
                    "https://web.example/p/9")
FORK_PULL = PullInfo(9, "Speed up parsing", "Faster.", "patch-1", "b" * 40, "mallory/calendar", "main",
                     "https://web.example/p/9", "https://git.example/mallory/calendar.git", True)


ALICE = {"repo": "octo/calendar", "sender_login": "alice", "sender_type": "User"}


def test_a_labeled_issue_gets_its_own_branch_and_a_pull_request_that_closes_it():
    p = plan(Issue(number=7, **ALICE), Facts(REPO, ISSUE), tag="cli:r1", sandbox_mode="docker")
    assert p.branch == "decode/issue-7-weekend-check-is-wrong"
    assert (p.base, p.config_base) == (None, None)  # the default branch, and its decode.yml
    assert p.delivery == OpenPull(base="main", closes=7)
    assert p.title == "Weekend check is wrong" and p.co_author == "alice <alice@users.noreply.github.com>"
    assert "Resolve issue #7 in octo/calendar" in p.task and "Saturdays count." in p.task


def test_a_comment_on_a_pull_request_of_the_repository_pushes_to_its_branch_with_the_base_branchs_config():
    t = Comment(number=9, is_pull_request=True, comment_id=1, instructions="add a test", **ALICE)
    p = plan(t, Facts(REPO, PR_AS_ISSUE, OWN_PULL), tag="cli:r1", sandbox_mode="docker")
    assert (p.branch, p.base, p.config_base) == ("fast-parse", "fast-parse", "release")
    assert p.delivery == PushToPull(9)
    assert "add a test" in p.task


def test_a_fork_starts_from_its_pull_ref_and_never_lands_in_a_base_branch():
    t = Comment(number=9, is_pull_request=True, comment_id=1, instructions="tidy up", **ALICE)
    p = plan(t, Facts(REPO, PR_AS_ISSUE, FORK_PULL), tag="cli:r1", sandbox_mode="docker")
    assert p.base == "refs/pull/9/head" and p.config_base == "main"  # the fork's decode.yml never applies
    assert p.delivery == ToFork(FORK_PULL)


@pytest.mark.parametrize("base_ref,expected", [(None, "main"), ("release", "release")])
def test_a_dispatch_opens_a_pull_request_from_a_run_branch(base_ref, expected):
    t = Dispatch(instructions="Bump the linter\nand fix what it finds", base_ref=base_ref, **ALICE)
    p = plan(t, Facts(REPO), tag="cli:r42", sandbox_mode="docker")
    assert (p.branch, p.base) == ("decode/run-r42", base_ref)
    assert p.delivery == OpenPull(base=expected, closes=None)
    assert p.title.startswith("Bump the linter") and "Carry out the request below" in p.task


def test_a_stores_dispatch_gets_a_branch_no_other_stores_job_of_that_number_has():
    t = Dispatch(instructions="Bump the linter", **ALICE)
    p = plan(t, Facts(REPO), tag="0123456789abcdef:job-1", sandbox_mode="docker")
    assert p.branch == "decode/run-0123456789abcdef-job-1"


def test_the_text_the_event_carried_wins_over_a_later_edit():
    t = Issue(number=7, title="As labeled", body="The body when labeled.", **ALICE)
    edited = IssueInfo(7, "Edited since", "Now asks for something else.", "alice", False, "u")
    p = plan(t, Facts(REPO, edited), tag="cli:r1", sandbox_mode="docker")
    assert p.branch == "decode/issue-7-as-labeled" and p.title == "As labeled"
    assert "The body when labeled." in p.task and "something else" not in p.task


def test_a_review_comment_carries_its_file_and_line():
    t = ReviewComment(number=9, comment_id=3, instructions="rename this", path="src/parse.py", line=12,
                      diff_hunk="@@ -1 +1 @@\n-a\n+b", **ALICE)
    p = plan(t, Facts(REPO, PR_AS_ISSUE, OWN_PULL), tag="cli:r1", sandbox_mode="docker")
    assert "src/parse.py" in p.task and "line 12" in p.task and p.delivery == PushToPull(9)
