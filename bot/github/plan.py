"""What a trigger means on GitHub, decided without I/O: the task text, the branch the agent starts
from and lands on, whose decode.yml applies, and how the result is delivered.

`plan` is a pure function of the work and the `Facts` (what GitHub said about the repository, the
issue and the pull request), so every case (issue, comment on an issue, comment or review comment on a
pull request of the same repository or of a fork, dispatch) is tested without a network. The
GitHub job fetches the facts, runs the plan and publishes its `delivery`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from bot.github.info import IssueInfo, PullInfo, RepoInfo, ReviewCommentInfo
from bot.core.names import issue_branch, run_branch
from bot.run.task_text import build_task
from bot.github.work import CheckSuite, Comment, Dispatch, Issue, Review, ReviewComment, Work


@dataclass(frozen=True)
class OpenPull:
    """A branch of our own, force-pushed and delivered as a pull request against `base`; `closes` is
    the issue the pull request resolves (None for a dispatch)."""

    base: str
    closes: int | None


@dataclass(frozen=True)
class PushToPull:
    """New commits on pull request `number`'s own branch, in this repository; a reply carries the rest."""

    number: int


@dataclass(frozen=True)
class ToFork:
    """A fork's pull request: the one commit goes to the fork's branch when maintainers may edit it,
    else (or when GitHub refuses the push) it comes back as a patch in a reply. Never into a branch of
    the base repository, where the fork's commits would run its workflows with the base's secrets."""

    pull: PullInfo


Delivery = OpenPull | PushToPull | ToFork


@dataclass(frozen=True)
class Threads:
    """The threads of a review on pull request `number` that a run answers, one reply in each: `first_comments`
    are the ids of their first comments, in the review's order; `review_id` tags the replies, so a retried job
    does not reply twice."""

    number: int
    review_id: int
    first_comments: tuple[int, ...]


@dataclass(frozen=True)
class Plan:
    """Everything the run needs besides the repository: what to do, where, and where it goes."""

    task: str
    branch: str  # the branch the agent's commit lands on
    clone_base: str | None  # what the workspace starts from: a branch, a `refs/pull/N/head`, or the default
    config_base: str | None  # the branch whose .github/decode.yml applies; None: `clone_base` itself
    title: str  # the commit subject and pull request title, raw user text
    co_author: str | None
    delivery: Delivery
    threads: Threads | None = None  # a review's threads, each answered once the run is published


@dataclass(frozen=True)
class Facts:
    """What GitHub said before the run: the repository, the issue or pull request the work is on (None for
    a workflow run), and that pull request's details when it is one."""

    repo: RepoInfo
    issue: IssueInfo | None = None
    pull: PullInfo | None = None
    review: tuple[ReviewCommentInfo, ...] = ()  # the comments of a `Review`
    ci: CiRound | None = None  # a `CheckSuite`: the round, and its task from the failed checks


@dataclass(frozen=True)
class CiRound:
    """Round `round` of `rounds` of fixing a pull request's failed checks; `task` is the agent's task, made from
    the checks' output and logs (bot/github/checks.py::ci_task_text), redacted and fenced."""

    round: int
    rounds: int
    task: str

    @property
    def title(self) -> str:
        """The commit subject; a later round counts the commits carrying it (bot/github/ci_fix.py)."""
        return f"{CI_SUBJECT} (round {self.round} of {self.rounds})"


CI_SUBJECT = "Fix the failing checks"


def plan(work: Work, facts: Facts, *, run_id: str) -> Plan:
    """The plan for `work` given `facts`; `run_id` names the branch of a workflow run."""
    login = work.sender_login
    co_author = f"{login} <{login}@users.noreply.github.com>" if login else None
    repo, issue, pull = facts.repo, facts.issue, facts.pull
    if isinstance(work, Dispatch):
        return Plan(task=build_task(work, issue_title="", issue_body=None), branch=run_branch(run_id),
                    clone_base=work.base_ref, config_base=None, title=work.instructions, co_author=co_author,
                    delivery=OpenPull(base=work.base_ref or repo.default_branch, closes=None))
    if issue is None:
        raise ValueError(f"work on #{work.number} is planned with the facts of its issue")
    if isinstance(work, CheckSuite):
        if pull is None or facts.ci is None:
            raise ValueError(f"a CI fix of #{work.number} is planned with its pull request and failed checks")
        return _on_pull(work, pull, facts.ci.task, facts.ci.title, None)
    issue = as_triggered(work, issue)
    task = build_task(work, issue_title=issue.title, issue_body=issue.body, is_pull=issue.is_pull,
                      pr_body=pull.body if pull and work.body is None else None, review=facts.review)
    if isinstance(work, Review):
        if pull is None:
            raise ValueError(f"review {work.review_id} is planned with the facts of pull request #{work.number}")
        threads = Threads(pull.number, work.review_id, tuple(dict.fromkeys(c.thread for c in facts.review)))
        return dataclasses.replace(_on_pull(work, pull, task, issue.title, co_author), threads=threads)
    if pull is None:
        return Plan(task=task, branch=issue_branch(issue.number, issue.title), clone_base=None, config_base=None,
                    title=issue.title, co_author=co_author,
                    delivery=OpenPull(base=repo.default_branch, closes=issue.number))
    return _on_pull(work, pull, task, issue.title, co_author)


def _on_pull(work: Work, pull: PullInfo, task: str, title: str, co_author: str | None) -> Plan:
    """Commits on pull request `pull`: its own branch in this repository, or a fork's delivery."""
    if pull.same_repo(work.repo):
        return Plan(task=task, branch=pull.head_ref, clone_base=pull.head_ref, config_base=pull.base_ref,
                    title=title, co_author=co_author, delivery=PushToPull(pull.number))
    # a fork's head, fetched from the base repository; its decode.yml never applies
    return Plan(task=task, branch=pull.head_ref, clone_base=f"refs/pull/{pull.number}/head",
                config_base=pull.base_ref, title=title, co_author=co_author, delivery=ToFork(pull))


def as_triggered(work: Issue | Comment | ReviewComment | Review, issue: IssueInfo) -> IssueInfo:
    """`issue` with the title and body the event carried, when it carried them: the job works on the text
    the maintainer saw when they triggered it, not on what its author changed it to since."""
    if work.title is None:
        return issue
    return dataclasses.replace(issue, title=work.title, body=work.body or "")
