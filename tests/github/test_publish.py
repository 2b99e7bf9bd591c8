"""The GitHub job's publishing step: a finished run delivered as its plan says, checked where people see
it: the branches of bare repositories standing in for GitHub's (and a fork's), and the pull requests and
comments an in-process `Forge` records. Real git and a real `Workspace`; no HTTP, sandbox or model."""

from __future__ import annotations

import re

import pytest

from bot.github.publish import publish
from bot.github.plan import OpenPull, Plan, PushToPull, ToFork
from bot.core.redact import Redactor
from tests.conftest import git
from tests.support.forge import MemoryForge
from tests.support.publish import CHANGE, bare, finished, fork_pull, head, holds, push_commit

REPO = "octo/calendar"
ISSUE_BRANCH = "decode/issue-12-weekend-check"
SECRET = "tok-5f3a9c1e7b2d4068"


def keep(text: str) -> str:
    return text


def hide(text: str) -> str:
    return text.replace(SECRET, "[hidden]")


def issue_plan() -> Plan:
    return Plan(task="Fix the weekend check", branch=ISSUE_BRANCH, base=None, config_base=None,
                title="Weekend check", co_author=None, delivery=OpenPull(base="main", closes=12))


def pull_plan(number: int = 5, branch: str = "weekend-fix") -> Plan:
    return Plan(task="Fix the weekend check", branch=branch, base=branch, config_base="main",
                title="Weekend check", co_author=None, delivery=PushToPull(number))


def fork_plan(pull) -> Plan:
    return Plan(task="Fix the weekend check", branch=pull.head_ref, base=f"refs/pull/{pull.number}/head",
                config_base="main", title="Weekend check", co_author=None, delivery=ToFork(pull))


def fork_run(tmp_path, *, edits: bool, meanwhile: dict[str, str] | None = None):
    """A run on a fork's pull request published: (base, fork, pull, outcome, conclusion, forge); `meanwhile`:
    files someone commits to the fork's branch while the run goes."""
    base, fork = bare(tmp_path / "base.git"), tmp_path / "fork.git"
    pull = fork_pull(base, fork, maintainer_can_modify=edits)
    outcome = finished(base, tmp_path / "run", branch=pull.head_ref, base=f"refs/pull/{pull.number}/head")
    if meanwhile:
        push_commit(fork, pull.head_ref, meanwhile)
    forge = MemoryForge()
    return base, fork, pull, outcome, publish(fork_plan(pull), outcome, forge, REPO, "origin:r1", keep), forge


def issue_run(tmp_path, **said):
    """A run on issue #12 published as a pull request: (remote, outcome, conclusion, forge); `said`: how the
    run went (see `finished`)."""
    remote, forge = bare(tmp_path / "base.git"), MemoryForge()
    outcome = finished(remote, tmp_path / "run", branch=ISSUE_BRANCH, **said)
    return remote, outcome, publish(issue_plan(), outcome, forge, REPO, "origin:r1", keep), forge


def texts(forge: MemoryForge) -> list[str]:
    """Everything the bot wrote on GitHub: pull request titles and bodies, comments."""
    return [t for pr in forge.pulls for t in (pr.title, pr.body)] + [c.body for c in forge.comments]


def test_a_completed_run_opens_one_pull_request_and_a_second_publish_updates_it(tmp_path):
    remote, outcome, conclusion, forge = issue_run(tmp_path)
    assert head(remote, f"refs/heads/{ISSUE_BRANCH}") == outcome.result.commit
    [pr] = forge.pulls
    assert (pr.head, pr.base, pr.draft) == (ISSUE_BRANCH, "main", False)
    assert "Fixed the weekend check." in pr.body and "Fixes #12" in pr.body and "`calendar.py`" in pr.body
    assert (conclusion.state, conclusion.result.exit_code, conclusion.result.pr_url) == ("success", 0, pr.html_url)
    assert conclusion.message.startswith(f"✅ Opened {pr.html_url}.")

    again = publish(issue_plan(), outcome, forge, REPO, "origin:r1", keep)
    assert [p.number for p in forge.pulls] == [pr.number] and pr.edits == 1
    assert again.result.pr_url == pr.html_url and again.message.startswith(f"✅ Updated {pr.html_url}.")


def test_a_failed_run_with_work_opens_a_draft_that_the_failure_line_names(tmp_path):
    remote, outcome, conclusion, forge = issue_run(tmp_path, stop_reason="error",
                                                   error="the model answered 529 three times")
    [pr] = forge.pulls
    assert pr.draft and head(remote, f"refs/heads/{ISSUE_BRANCH}") == outcome.result.commit
    assert (conclusion.state, conclusion.result.exit_code) == ("failed", 1)
    first = conclusion.message.splitlines()[0]
    assert first.startswith("❌ decode-bot failed: the model answered 529 three times")
    assert pr.html_url in first and "draft" in first


def test_a_run_stopped_by_a_budget_cap_opens_a_draft_and_exits_3(tmp_path):
    remote, outcome, conclusion, forge = issue_run(tmp_path, stop_reason="max_turns",
                                                   summary="Stopped at the turn limit.")
    [pr] = forge.pulls
    assert pr.draft and head(remote, f"refs/heads/{ISSUE_BRANCH}") == outcome.result.commit
    assert (conclusion.state, conclusion.result.exit_code, conclusion.result.pr_url) == ("incomplete", 3, pr.html_url)
    assert conclusion.message.startswith(f"⚠️ Opened {pr.html_url} as a draft")


@pytest.mark.parametrize(("stop_reason", "state", "exit_code"), [("completed", "no_changes", 0),
                                                                 ("error", "failed", 1),
                                                                 ("max_turns", "no_changes", 3)])  # as `decode run` locally
def test_a_run_without_a_commit_pushes_nothing_and_opens_nothing(tmp_path, stop_reason, state, exit_code):
    remote, outcome, conclusion, forge = issue_run(
        tmp_path, stop_reason=stop_reason, change=None, error="the sandbox died" if stop_reason == "error" else None)
    assert outcome.result.commit is None
    assert head(remote, f"refs/heads/{ISSUE_BRANCH}") is None
    assert forge.pulls == [] and forge.comments == []
    assert (conclusion.state, conclusion.result.exit_code, conclusion.result.pr_url) == (state, exit_code, None)


def test_a_pull_request_of_this_repository_gets_the_commit_on_its_own_branch(tmp_path):
    remote = bare(tmp_path / "base.git", branches={"weekend-fix": {"NOTES.md": "Saturdays count.\n"}})
    before, forge = head(remote, "refs/heads/weekend-fix"), MemoryForge()
    outcome = finished(remote, tmp_path / "run", branch="weekend-fix", base="weekend-fix")
    conclusion = publish(pull_plan(), outcome, forge, REPO, "origin:r1", keep)
    assert head(remote, "refs/heads/weekend-fix") == outcome.result.commit
    git(remote, "merge-base", "--is-ancestor", before, outcome.result.commit)  # a fast-forward, not a force-push
    assert forge.pulls == []
    assert conclusion.state == "success" and conclusion.result.branch == "weekend-fix"
    assert conclusion.message.startswith(f"✅ Pushed {outcome.result.commit[:12]} to `weekend-fix`.")


def test_a_fork_that_allows_maintainer_edits_gets_the_commit_and_the_base_never_sees_it(tmp_path):
    base, fork, pull, outcome, conclusion, forge = fork_run(tmp_path, edits=True)
    assert head(fork, f"refs/heads/{pull.head_ref}") == outcome.result.commit
    git(fork, "merge-base", "--is-ancestor", pull.head_sha, outcome.result.commit)
    assert not holds(base, outcome.result.commit) and head(base, f"refs/heads/{pull.head_ref}") is None
    assert forge.pulls == [] and conclusion.state == "success"
    assert f"✅ Pushed {outcome.result.commit[:12]} to the fork's branch `mona/calendar:weekend-fix`" in conclusion.message


def test_a_fork_closed_to_maintainers_gets_a_patch_that_git_am_applies_on_its_head(tmp_path):
    base, fork, pull, outcome, conclusion, forge = fork_run(tmp_path, edits=False)
    assert head(fork, f"refs/heads/{pull.head_ref}") == pull.head_sha
    assert not holds(fork, outcome.result.commit) and not holds(base, outcome.result.commit)
    assert conclusion.message.startswith("📎 decode-bot could not push to `mona/calendar:weekend-fix`")
    [patch] = re.findall(r"^(`{3,})diff\n(.*?)\n\1$", conclusion.message, re.S | re.M)
    (tmp_path / "decode.patch").write_text(patch[1] + "\n")
    clone = tmp_path / "applied"
    git(tmp_path, "clone", "-q", "-b", pull.head_ref, str(fork), str(clone))
    git(clone, "am", "-q", str(tmp_path / "decode.patch"))
    made = git(outcome.workspace.clean, "rev-parse", f"{outcome.result.commit}^{{tree}}")
    assert git(clone, "rev-parse", "HEAD^{tree}") == made
    assert (clone / "calendar.py").read_text() == CHANGE["calendar.py"]


def test_a_fork_branch_that_moved_on_is_not_overwritten_and_gets_the_patch(tmp_path):
    theirs = {"NOTES.md": "Sundays too.\n"}
    base, fork, pull, outcome, conclusion, _ = fork_run(tmp_path, edits=True, meanwhile=theirs)
    assert head(fork, f"refs/heads/{pull.head_ref}") != outcome.result.commit
    assert git(fork, "show", f"{pull.head_ref}:NOTES.md") == "Sundays too."
    assert not holds(base, outcome.result.commit) and conclusion.state == "success"
    first = conclusion.message.splitlines()[0]
    assert first.startswith("📎 decode-bot could not push to `mona/calendar:weekend-fix`: GitHub refused the push")
    assert "```diff\n" in conclusion.message and "git am decode.patch" in conclusion.message


@pytest.mark.parametrize("delivery", ["pull request", "push to pull", "fork patch"])
def test_a_secret_in_the_summary_reaches_github_nowhere(tmp_path, delivery):
    remote = bare(tmp_path / "base.git", branches={"weekend-fix": {"NOTES.md": "Saturdays count.\n"}})
    forge, redactor = MemoryForge(), Redactor([SECRET])
    said = dict(stop_reason="error", summary=f"I used {SECRET} to log in.", error=f"login {SECRET} expired",
                redactor=redactor)
    if delivery == "pull request":
        the_plan = issue_plan()
        outcome = finished(remote, tmp_path / "run", branch=ISSUE_BRANCH, **said)
    elif delivery == "push to pull":
        the_plan = pull_plan()
        outcome = finished(remote, tmp_path / "run", branch="weekend-fix", base="weekend-fix", **said)
    else:
        pull = fork_pull(remote, tmp_path / "fork.git", number=8, branch="fork-fix", maintainer_can_modify=False)
        the_plan = fork_plan(pull)
        outcome = finished(remote, tmp_path / "run", branch="fork-fix", base="refs/pull/8/head", **said)
    conclusion = publish(the_plan, outcome, forge, REPO, "origin:r1", hide)
    written = texts(forge) + [conclusion.message]  # the message becomes the tracking comment
    assert not [t for t in written if SECRET in t]
    assert "I used [hidden] to log in." in "\n".join(written)
    assert conclusion.message.startswith("❌ decode-bot failed: login [hidden] expired")
