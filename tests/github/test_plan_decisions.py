"""The plan's decisions besides the plan itself: whether unasked work runs (`admit`: a review requesting
changes, a failed check suite), who is asked for permission, the fork refusal and the edited-since note.
Pure: no network, no git, no sandbox."""

from __future__ import annotations

import dataclasses

import pytest

from bot.core.errors import ConfigError
from bot.github.checks import CommitIdentity
from bot.github.conclusion import marker
from bot.github.info import IssueInfo, PullInfo
from bot.github.plan import (
    CI_SUBJECT, Admission, Facts, OptIn, Plan, Skip, ToFork, admit, ci_rounds_used, edited_note, human_pushed,
    is_ours, plan,
)
from bot.github.work import CheckSuite, Comment, Dispatch, Issue, Review
from bot.workspace.clone import BOT_IDENTITY
from tests.github.test_plan import ALICE, FORK_PULL, PR_AS_ISSUE, REPO

BOT = "decode-bot[bot]"
HEAD = "c" * 40
OUR_PULL = PullInfo(9, "Fix the parser", "Fixes #7", "decode/issue-7-parser", HEAD, "octo/calendar", "main",
                    "https://web.example/p/9")
OURS = CommitIdentity("a1", BOT_IDENTITY, BOT_IDENTITY, "decode: Fix the parser")
HUMAN = ("Alice", "alice@example.com")
GITHUB = ("GitHub", "noreply@github.com")


def ci_commit(n: int) -> CommitIdentity:
    return CommitIdentity(f"f{n}", BOT_IDENTITY, BOT_IDENTITY, f"decode: {CI_SUBJECT} (round {n} of 2)")


def opt_in(config: str | None, *, author: str = BOT, pull: PullInfo = OUR_PULL,
           commits: tuple[CommitIdentity, ...] = (OURS,)) -> OptIn:
    return OptIn(author, BOT, pull, None if config is None else config.encode(), commits)


def unasked_review() -> Review:
    return Review(number=9, review_id=55, instructions="Please rename it.", by_command=False, **ALICE)


def suite(head: str = HEAD) -> CheckSuite:
    return CheckSuite(repo="octo/calendar", number=9, head_sha=head, sender_login="github-actions[bot]")


# -- a review requesting changes -------------------------------------------------------------------------------
def test_a_review_on_a_decode_pull_request_that_opted_in_runs_and_asks_the_reviewer_for_permission():
    admitted = admit(unasked_review(), opt_in("review_trigger: changes_requested\n"), authorize=True)
    assert admitted == Admission(authorize=True, track=True, doing="working on this")


@pytest.mark.parametrize("facts, why", [
    (opt_in("review_trigger: changes_requested\n", author="alice"), "is not a pull request decode-bot opened"),
    (opt_in("review_trigger: changes_requested\n", pull=dataclasses.replace(OUR_PULL, head_ref="fix-parser")),
     "is not a pull request decode-bot opened"),
    (opt_in("review_trigger: changes_requested\n", pull=dataclasses.replace(OUR_PULL, head_repo="mallory/calendar")),
     "is not a pull request decode-bot opened"),
    (opt_in(None), "does not say review_trigger: changes_requested"),
    (opt_in("ci_fix: {rounds: 2}\n"), ".github/decode.yml on main does not say review_trigger"),
])
def test_a_review_elsewhere_starts_nothing(facts, why):
    skipped = admit(unasked_review(), facts, authorize=True)
    assert isinstance(skipped, Skip) and why in skipped.reason and skipped.notice is None


def test_a_review_by_command_runs_without_an_opt_in():
    review = dataclasses.replace(unasked_review(), by_command=True)
    assert admit(review, None, authorize=True) == Admission(authorize=True, track=True)


def test_the_base_config_is_read_only_on_a_decode_pull_request():
    with pytest.raises(ConfigError, match="not valid YAML"):
        admit(unasked_review(), opt_in("review_trigger: [\n"), authorize=True)
    foreign = admit(unasked_review(), opt_in("review_trigger: [\n", author="alice"), authorize=True)
    assert isinstance(foreign, Skip)


def test_unasked_work_is_admitted_only_with_its_facts():
    with pytest.raises(ValueError, match="unasked work on #9"):
        admit(suite(), None, authorize=True)


# -- a failed check suite -------------------------------------------------------------------------------------
def test_a_failed_suite_on_a_decode_pull_request_starts_the_next_round_without_asking_the_sender():
    admitted = admit(suite(), opt_in("ci_fix: {rounds: 2}\n", commits=(OURS, ci_commit(1))), authorize=True)
    assert admitted == Admission(authorize=False, track=True, doing="fixing the failing checks (round 2 of 2)",
                                 ci=(2, 2))


@pytest.mark.parametrize("work, facts, why", [
    (suite(), opt_in("review_trigger: changes_requested\n"), "does not set ci_fix"),
    (suite("d" * 40), opt_in("ci_fix: {rounds: 2}\n"), "has moved on since"),
    (suite(), opt_in("ci_fix: {rounds: 2}\n", commits=(OURS, CommitIdentity("h1", HUMAN, HUMAN))),
     "someone pushed to decode/issue-7-parser after decode-bot's last commit"),
    (suite(), opt_in("ci_fix: {rounds: 2}\n", author="alice"), "is not a pull request decode-bot opened"),
])
def test_a_failed_suite_that_is_not_ours_to_fix_starts_nothing_silently(work, facts, why):
    skipped = admit(work, facts, authorize=True)
    assert isinstance(skipped, Skip) and why in skipped.reason and skipped.notice is None


def test_used_up_rounds_are_said_once_per_head():
    skipped = admit(suite(), opt_in("ci_fix: {rounds: 2}\n", commits=(OURS, ci_commit(1), ci_commit(2))),
                    authorize=True)
    assert isinstance(skipped, Skip) and skipped.reason == "the 2 CI-fix rounds are used up"
    assert skipped.notice is not None
    tag, text = skipped.notice
    assert tag == marker("ci-stop", HEAD) and text.endswith(tag)
    assert text.startswith("🛑 The checks still fail after 2 CI-fix rounds (`ci_fix: {rounds: 2}`")


def test_the_rounds_used_are_counted_back_from_the_tip():
    assert ci_rounds_used([ci_commit(1), OURS, ci_commit(1), ci_commit(2)]) == 2
    assert ci_rounds_used([ci_commit(1), CommitIdentity("h", HUMAN, HUMAN, f"decode: {CI_SUBJECT}")]) == 0
    assert ci_rounds_used([]) == 0


# -- who is asked, who is told ------------------------------------------------------------------------------------
@pytest.mark.parametrize("authorize", [True, False])
def test_the_callers_word_decides_whether_a_sender_is_asked_and_a_workflow_run_has_no_tracking_comment(authorize):
    issue = Issue(number=7, **ALICE)
    assert admit(issue, None, authorize=authorize) == Admission(authorize=authorize, track=True)
    dispatch = Dispatch(instructions="bump it", **ALICE)
    assert admit(dispatch, None, authorize=authorize) == Admission(authorize=authorize, track=False)


# -- the fork refusal ----------------------------------------------------------------------------------------------
FORK_COMMENT = Comment(number=9, is_pull_request=True, comment_id=1, instructions="tidy up", **ALICE)


def test_a_forks_code_is_refused_outside_an_isolating_sandbox():
    skipped = plan(FORK_COMMENT, Facts(REPO, PR_AS_ISSUE, FORK_PULL), tag="cli:r1", sandbox_mode="local")
    assert isinstance(skipped, Skip) and skipped.notice is None
    assert skipped.reason.startswith("🔒 decode-bot did not run: this pull request comes from a fork")
    assert "SANDBOX_MODE=local" in skipped.reason and "(bwrap, docker, modal)" in skipped.reason


@pytest.mark.parametrize("mode", ["bwrap", "docker", "modal"])
def test_a_forks_code_runs_in_an_isolating_sandbox(mode):
    planned = plan(FORK_COMMENT, Facts(REPO, PR_AS_ISSUE, FORK_PULL), tag="cli:r1", sandbox_mode=mode)
    assert isinstance(planned, Plan) and planned.delivery == ToFork(FORK_PULL)


def test_a_pull_request_of_the_repository_runs_anywhere():
    own = dataclasses.replace(FORK_PULL, head_repo="octo/calendar")
    assert isinstance(plan(FORK_COMMENT, Facts(REPO, PR_AS_ISSUE, own), tag="cli:r1", sandbox_mode="local"), Plan)


# -- the edited-since note ------------------------------------------------------------------------------------------
LABELED = Issue(number=7, title="Weekend check", body="Saturdays count.", **ALICE)
NOW = IssueInfo(7, "Weekend check", "Saturdays count.", "alice", False, "https://web.example/i/7")


def test_an_issue_edited_since_it_was_labeled_gets_a_note_and_the_text_as_labeled():
    now = dataclasses.replace(NOW, body="Sundays count too.")
    planned = plan(LABELED, Facts(REPO, now), tag="cli:r1", sandbox_mode="local")
    assert isinstance(planned, Plan) and "Saturdays count." in planned.task
    assert planned.note == ("ℹ️ The issue was edited after it was labeled; decode-bot worked on the text as it "
                            "was when labeled. Run it again to work on the current text.")


def test_the_same_text_with_other_line_ends_or_no_text_in_the_event_is_no_edit():
    assert edited_note(LABELED, dataclasses.replace(NOW, body="Saturdays count.\r\n")) is None
    assert edited_note(dataclasses.replace(LABELED, title=None, body=None), NOW) is None
    planned = plan(LABELED, Facts(REPO, NOW), tag="cli:r1", sandbox_mode="local")
    assert isinstance(planned, Plan) and planned.note is None


def test_the_note_names_what_was_edited_and_what_started_the_work():
    pull_now = dataclasses.replace(PR_AS_ISSUE, title="Renamed")
    comment = dataclasses.replace(FORK_COMMENT, title=PR_AS_ISSUE.title, body=PR_AS_ISSUE.body)
    assert edited_note(comment, pull_now).startswith("ℹ️ The pull request was edited after the command was posted")
    review = Review(number=9, review_id=5, instructions="", title=PR_AS_ISSUE.title, body=PR_AS_ISSUE.body, **ALICE)
    note = edited_note(review, pull_now)
    assert note is not None and "after the review was submitted; decode-bot worked on the text as it was then" in note
    assert edited_note(Dispatch(instructions="bump it", **ALICE), None) is None


def test_a_refused_fork_still_carries_the_note():
    comment = dataclasses.replace(FORK_COMMENT, title="Old title", body=PR_AS_ISSUE.body)
    skipped = plan(comment, Facts(REPO, PR_AS_ISSUE, FORK_PULL), tag="cli:r1", sandbox_mode="local")
    assert isinstance(skipped, Skip) and skipped.reason.startswith("🔒")
    assert skipped.reason.endswith("\n\nℹ️ The pull request was edited after the command was posted; decode-bot "
                                   "worked on the text as it was when the command was posted. Run it again to "
                                   "work on the current text.")


# -- who pushed ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("commits, pushed", [
    ([OURS], False),
    ([CommitIdentity("h0", HUMAN, HUMAN), OURS], False),  # a human's work before our last commit
    ([OURS, CommitIdentity("h1", HUMAN, HUMAN)], True),
    ([OURS, CommitIdentity("h2", BOT_IDENTITY, HUMAN)], True),  # our commit amended or rebased by a person
    ([OURS, CommitIdentity("m1", HUMAN, GITHUB)], True),  # GitHub's "Update branch" merge
    ([OURS, CommitIdentity("r1", BOT_IDENTITY, GITHUB)], True),  # "Update branch" by rebase
    ([], True),
])
def test_human_pushed(commits, pushed):
    assert human_pushed(commits) is pushed


def test_our_identity_is_matched_on_name_and_email_any_case():
    name, email = BOT_IDENTITY
    assert is_ours(CommitIdentity("x", (name, email.upper()), (name, email)))
    assert not is_ours(CommitIdentity("x", ("someone", email), (name, email)))


def test_a_commit_github_made_as_the_bot_is_ours_and_a_persons_web_edit_is_not():
    app = ("decode-bot[bot]", "1234+decode-bot[bot]@users.noreply.github.com")
    made = CommitIdentity("a2", app, ("GitHub", "noreply@github.com"), f"decode: {CI_SUBJECT} (round 1 of 2)")
    assert is_ours(made, "decode-bot[bot]") and not human_pushed([OURS, made], "decode-bot[bot]")
    assert ci_rounds_used([ci_commit(1), made], "decode-bot[bot]") == 2
    assert not is_ours(made, "other-app[bot]") and not is_ours(made)
    person = ("alice", "77+alice@users.noreply.github.com")
    assert human_pushed([made, CommitIdentity("w1", person, ("GitHub", "noreply@github.com"))], "decode-bot[bot]")
    assert not is_ours(CommitIdentity("w2", person, ("GitHub", "noreply@github.com")), "alice")
