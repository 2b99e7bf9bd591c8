"""Whether work nobody asked for by command runs: a review requesting changes, a failed check suite.

Both run only on a pull request decode-bot opened from a `decode/` branch of the repository, and only
when the base branch's `.github/decode.yml` (as merged there, never the head's; read through the API,
since no clone exists yet) opts in: `review_trigger: changes_requested`, or `ci_fix: {rounds: N}`.
A failed suite also needs the pull request's head to still be the suite's commit, no person to have
pushed since decode-bot's last commit, and rounds left: the rounds used are decode-bot's CI-fix commits
at the tip of the branch (`CiRound.title`), so a person's push starts the count again.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.github.checks import CommitIdentity, human_pushed, is_ours
from bot.github.conclusion import marker
from bot.github.forge import Forge
from bot.github.info import PullInfo
from bot.github.plan import CI_SUBJECT
from bot.run.repo_config import PATH, RepoConfig, config_of
from bot.github.work import CheckSuite, Review


@dataclass(frozen=True)
class Opted:
    """A decode-bot pull request and its base branch's config: the work may run."""

    pull: PullInfo
    config: RepoConfig


def decode_pull(work: Review | CheckSuite, forge: Forge) -> Opted | str:
    """The pull request `work` is on, with its base's config, or why it is not decode-bot's."""
    issue, pull = forge.issue(work.repo, work.number), forge.pull(work.repo, work.number)
    ours = issue.author.lower() == (forge.bot_login() or "").lower()
    if not (ours and pull.same_repo(work.repo) and pull.head_ref.startswith("decode/")):
        return f"#{work.number} is not a pull request decode-bot opened; only the command starts work there"
    return Opted(pull, config_of(forge.file_at(work.repo, PATH, pull.base_ref), f" on {pull.base_ref}"))


def review_gate(work: Review, forge: Forge) -> str | None:
    """Why a review that requests changes (without the command) starts nothing, or None when it runs."""
    opted = decode_pull(work, forge)
    if isinstance(opted, str):
        return opted
    if opted.config.review_trigger != "changes_requested":
        return f"{PATH} on {opted.pull.base_ref} does not say review_trigger: changes_requested"
    return None


def ci_rounds_used(commits: list[CommitIdentity]) -> int:
    """decode-bot's CI-fix commits at the tip of the branch, counted back to the first commit that is not one."""
    used = 0
    for commit in reversed(commits):
        # "decode: <title>", or "decode (incomplete: ...): <title>" (bot/run/pipeline.py::commit_message)
        if not (is_ours(commit) and commit.subject.partition(": ")[2].startswith(CI_SUBJECT)):
            break
        used += 1
    return used


def ci_gate(work: CheckSuite, forge: Forge) -> tuple[int, int] | str:
    """(round, rounds) when a failed suite starts a fix run, else why not. When the rounds are used up,
    the pull request is told once for that head."""
    opted = decode_pull(work, forge)
    if isinstance(opted, str):
        return opted
    rounds = opted.config.ci_fix_rounds
    if not rounds:
        return f"{PATH} on {opted.pull.base_ref} does not set ci_fix"
    if opted.pull.head_sha != work.head_sha:
        return f"the suite ran on {work.head_sha[:12]}, and #{work.number}'s head has moved on since"
    commits = forge.pull_commits(work.repo, work.number)
    if human_pushed(commits):
        return f"someone pushed to {opted.pull.head_ref} after decode-bot's last commit: CI fixes stop there"
    used = ci_rounds_used(commits)
    if used >= rounds:
        tag = marker("ci-stop", work.head_sha)
        if forge.find_comment(work.repo, work.number, tag) is None:
            forge.post_comment(work.repo, work.number, f"🛑 The checks still fail after {used} CI-fix "
                               f"round{'s' * (used != 1)} (`ci_fix: {{rounds: {rounds}}}` in `{PATH}`); "
                               f"decode-bot stops here. Push a fix, or comment `/decode ...` to ask for "
                               f"another try.\n\n{tag}", tag)
        return f"the {rounds} CI-fix rounds are used up"
    return used + 1, rounds
