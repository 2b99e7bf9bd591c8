"""What a trigger means on GitHub, decided without I/O: whether it runs at all, the task text, the branch
the agent starts from and lands on, whose decode.yml applies, and how the result is delivered.

Two pure decisions, in the order the GitHub job (bot/github/job.py) meets them:
- `admit`, before anyone is told: unasked work (a review requesting changes without the command, a
  failed check suite) runs only on a pull request decode-bot opened, where the base branch's decode.yml
  opts in (`review_trigger: changes_requested`, `ci_fix: {rounds: N}`); a suite also needs its commit to
  still be the head, no person to have pushed since decode-bot's last commit, and rounds left. It also
  says whether the sender's permission is checked and whether a tracking comment follows.
- `plan`, once the tracking comment is up and the facts are read: the fork refusal (a fork's code runs
  only in an isolating sandbox), the note that the issue was edited since the event, and the plan.
Each returns a `Skip` with the reason when the work does not run. The job gathers the facts through
the forge, so every case is tested without a network.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeGuard

from bot.github.checks import CommitIdentity
from bot.github.conclusion import marker
from bot.github.info import GITHUB_COMMITTER, IssueInfo, PullInfo, RepoInfo, ReviewCommentInfo
from bot.github.task_text import build_task
from bot.core.names import is_decode_branch, issue_branch, run_branch
from bot.run.repo_config import PATH, RepoConfig, config_of
from bot.sandbox import ISOLATING
from bot.workspace.clone import BOT_IDENTITY
from bot.github.resume import PullState, continue_task, read_state
from bot.github.modes import ALLOW, GO, IMPLEMENT, PLAN, REVIEW, RunMode
from bot.github.planning import PlanText, go_task, planning_task
from bot.github.work import (
    Allow, CheckSuite, Comment, Continue, Dispatch, Go, Issue, Labels, PlanRequest, Review, ReviewComment, Work,
)


@dataclass(frozen=True)
class OpenPull:
    """A branch of our own, force-pushed and delivered as a pull request against `base`; `closes` is
    the issue the pull request resolves (None for a dispatch)."""

    base: str
    closes: int | None
    plan_url: str | None = None  # `/decode go`: the plan comment the run carried out, linked from the body


@dataclass(frozen=True)
class PlanComment:
    """`/decode plan`: nothing is pushed; the run's answer is the plan comment on issue `number`."""

    number: int


@dataclass(frozen=True)
class AllowHosts:
    """`/decode allow`: a pull request against `base` adding `hosts` to decode.yml's `allow_domains`."""

    hosts: tuple[str, ...]
    base: str


@dataclass(frozen=True)
class PushToPull:
    """New commits on pull request `number`'s own branch, in this repository; a reply carries the rest.
    `stateful`: its description keeps decode-bot's record of the runs on the branch (bot/github/resume.py),
    which the run is added to."""

    number: int
    stateful: bool = False


@dataclass(frozen=True)
class ToFork:
    """A fork's pull request: the one commit goes to the fork's branch when maintainers may edit it,
    else (or when GitHub refuses the push) it comes back as a patch in a reply. Never into a branch of
    the base repository, where the fork's commits would run its workflows with the base's secrets."""

    pull: PullInfo


@dataclass(frozen=True)
class Resume:
    """`/decode continue`: new commits on decode-bot's pull request `pull`, whose description is then rebuilt
    over every run on its branch, from `state` (what the description recorded) and this run."""

    pull: PullInfo
    state: PullState


Delivery = OpenPull | PushToPull | ToFork | Resume | PlanComment | AllowHosts


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
    base: str | None  # what the run starts from (`Job.base`): a branch, a `refs/pull/N/head`, or the default
    config_base: str | None  # the branch whose .github/decode.yml applies; None: `base` itself
    title: str  # the commit subject and pull request title, raw user text
    co_author: str | None
    delivery: Delivery
    threads: Threads | None = None  # a review's threads, each answered once the run is published
    note: str | None = None  # for the report: the issue or pull request was edited after the event
    mode: RunMode = IMPLEMENT  # the kind of run: its tools, whether an agent runs


@dataclass(frozen=True)
class Skip:
    """Why the work does not run; `notice` is (marker, comment) to post on the pull request once."""

    reason: str
    notice: tuple[str, str] | None = None


@dataclass(frozen=True)
class Facts:
    """What GitHub said before the run: the repository, the issue or pull request the work is on (None for
    a workflow run), and that pull request's details when it is one."""

    repo: RepoInfo
    issue: IssueInfo | None = None
    pull: PullInfo | None = None
    review: tuple[ReviewCommentInfo, ...] = ()  # the comments of a `Review`
    ci: CiRound | None = None  # a `CheckSuite`: the round, and its task from the failed checks
    resume: PullState | None = None  # a `Continue`: the runs the pull request's description records
    plan: PlanText | None = None  # a `Go`: the issue's plan comment as it reads now


@dataclass(frozen=True)
class CiRound:
    """Round `round` of `rounds` of fixing a pull request's failed checks; `task` is the agent's task, made from
    the checks' output and logs (bot/github/task_text.py::ci_task_text), redacted and fenced."""

    round: int
    rounds: int
    task: str

    @property
    def title(self) -> str:
        """The commit subject; a later round counts the commits carrying it (`ci_rounds_used`)."""
        return f"{CI_SUBJECT} (round {self.round} of {self.rounds})"


CI_SUBJECT = "Fix the failing checks"


@dataclass(frozen=True)
class OptIn:
    """What GitHub says about the pull request unasked work is on, read before anyone is told: who opened it
    (`author`) and who decode-bot is (`bot_login`), the pull request, its base branch's decode.yml as it is
    there (None: there is none), and for a failed suite the pull request's commits, oldest first."""

    author: str
    bot_login: str | None
    pull: PullInfo
    config: bytes | None
    commits: tuple[CommitIdentity, ...] = ()


@dataclass(frozen=True)
class Admission:
    """How admitted work goes on: whether the sender's permission is checked, whether a tracking comment
    follows the work, what it says decode-bot is doing, and (round, rounds) of a CI fix."""

    authorize: bool
    track: bool
    doing: str = "working on this"
    ci: tuple[int, int] | None = None


def unasked(work: Work) -> TypeGuard[Review | CheckSuite]:
    """Whether `work` runs only where the repository opted in, which `admit` decides from an `OptIn`: a review
    requesting changes without the command, a failed check suite."""
    return isinstance(work, CheckSuite) or (isinstance(work, Review) and not work.by_command)


def admit(work: Work, opt_in: OptIn | None, *, authorize: bool) -> Admission | Skip:
    """Whether `work` runs, decided before anyone is told; `opt_in` is read for `unasked` work (None otherwise),
    `authorize` is False where the caller vouches for the sender (the CLI, a workflow run)."""
    if unasked(work) and opt_in is None:
        raise ValueError(f"unasked work on #{work.number} is admitted with the facts of its pull request")
    if isinstance(work, Review) and not work.by_command and opt_in is not None:
        config = _opted(work, opt_in)
        if isinstance(config, Skip):
            return config
        if config.review_trigger != "changes_requested":
            return Skip(f"{PATH} on {opt_in.pull.base_ref} does not say review_trigger: changes_requested")
    if isinstance(work, CheckSuite) and opt_in is not None:
        ci = _ci_round(work, opt_in)
        if isinstance(ci, Skip):
            return ci
        # a failed suite's sender is whoever GitHub names; its authority is decode.yml's ci_fix
        return Admission(authorize=False, track=True, doing=f"fixing the failing checks (round {ci[0]} of {ci[1]})",
                         ci=ci)
    doing = {Continue: "continuing the run that stopped early", PlanRequest: "making a plan (it changes nothing)",
             Go: "carrying out the plan", Allow: "opening a pull request that allows those hosts"
             }.get(type(work), Admission.doing)
    return Admission(authorize=authorize, track=not isinstance(work, Dispatch), doing=doing)


def _opted(work: Review | CheckSuite, opt_in: OptIn) -> RepoConfig | Skip:
    """The base branch's config when the pull request is one decode-bot opened from a `decode/` branch of the
    repository, else why it is not decode-bot's."""
    pull = opt_in.pull
    ours = opt_in.author.lower() == (opt_in.bot_login or "").lower()
    if not (ours and pull.same_repo(work.repo) and is_decode_branch(pull.head_ref)):
        return Skip(f"#{work.number} is not a pull request decode-bot opened; only the command starts work there")
    return config_of(opt_in.config, f" on {pull.base_ref}")


def _ci_round(work: CheckSuite, opt_in: OptIn) -> tuple[int, int] | Skip:
    """(round, rounds) when a failed suite starts a fix run, else why not. When the rounds are used up, the
    pull request is told once for that head."""
    config = _opted(work, opt_in)
    if isinstance(config, Skip):
        return config
    pull, rounds = opt_in.pull, config.ci_fix_rounds
    if not rounds:
        return Skip(f"{PATH} on {pull.base_ref} does not set ci_fix")
    if pull.head_sha != work.head_sha:
        return Skip(f"the suite ran on {work.head_sha[:12]}, and #{work.number}'s head has moved on since")
    if human_pushed(opt_in.commits, opt_in.bot_login):
        return Skip(f"someone pushed to {pull.head_ref} after decode-bot's last commit: CI fixes stop there")
    used = ci_rounds_used(opt_in.commits, opt_in.bot_login)
    if used < rounds:
        return used + 1, rounds
    tag = marker("ci-stop", work.head_sha)
    return Skip(f"the {rounds} CI-fix rounds are used up", notice=(tag, (
        f"🛑 The checks still fail after {used} CI-fix round{'s' * (used != 1)} (`ci_fix: {{rounds: {rounds}}}` "
        f"in `{PATH}`); decode-bot stops here. Push a fix, or comment `/decode ...` to ask for another "
        f"try.\n\n{tag}")))


def ci_rounds_used(commits: Sequence[CommitIdentity], bot_login: str | None = None) -> int:
    """decode-bot's CI-fix commits at the tip of the branch, counted back to the first commit that is not one."""
    used = 0
    for commit in reversed(commits):
        # "decode: <title>", or "decode (incomplete: ...): <title>" (bot/run/messages.py::commit_message)
        if not (is_ours(commit, bot_login) and commit.subject.partition(": ")[2].startswith(CI_SUBJECT)):
            break
        used += 1
    return used


def is_ours(commit: CommitIdentity, bot_login: str | None = None, identity: tuple[str, str] = BOT_IDENTITY) -> bool:
    """Whether decode-bot made `commit`: pushed with git, author and committer are both our identity
    (bot/workspace/clone.py); made through GitHub's API (bot/github/api_commit.py), the author is `bot_login`
    (a `[bot]`: a person's token makes commits as that person) with its noreply address and the committer
    GitHub itself (or the bot too).

    A person's amend, rebase or cherry-pick keeps our author but makes them the committer; GitHub's
    "Update branch" commits as GitHub: neither is ours, except that a rebase by GitHub of a commit made through
    the API keeps both names, as identities are not authenticated.
    """
    name, email = identity
    if all(who[0] == name and who[1].lower() == email.lower() for who in (commit.author, commit.committer)):
        return True
    login = (bot_login or "").lower()
    made_as = re.compile(rf"(\d+\+)?{re.escape(login)}@users\.noreply\.github\.com")
    author, committer = commit.author, (commit.committer[0], commit.committer[1].lower())
    return login.endswith("[bot]") and author[0].lower() == login and bool(made_as.fullmatch(author[1].lower())) and \
        (committer == GITHUB_COMMITTER or committer == (author[0], author[1].lower()))


def human_pushed(commits: Sequence[CommitIdentity], bot_login: str | None = None,
                 identity: tuple[str, str] = BOT_IDENTITY) -> bool:
    """Whether someone else pushed to the branch after decode-bot's last commit on it.

    `commits` are the branch's commits in order, oldest first (as `GET .../pulls/{n}/commits` lists them),
    or just its head. That is the case exactly when the head is not ours, or when none is ours at all.
    Git identities are not authenticated: someone who commits under our identity is treated as us, which
    only lets a person with push access keep the rounds going, never stop someone else's work.
    """
    return not commits or not is_ours(commits[-1], bot_login, identity)


def plan(work: Work, facts: Facts, *, tag: str, sandbox_mode: str) -> Plan | Skip:
    """The plan for `work` given `facts`, or why it does not run; the run's `tag` names the branch of a workflow run,
    `sandbox_mode` is where the agent would run (a fork's code needs an isolating one)."""
    the_plan = _plan(work, facts, tag=tag)
    note = edited_note(work, facts.issue)
    if isinstance(the_plan.delivery, ToFork) and sandbox_mode not in ISOLATING:
        return Skip("\n\n".join(filter(None, [fork_refusal(sandbox_mode), note])))
    return dataclasses.replace(the_plan, note=note)


def fork_refusal(sandbox_mode: str) -> str:
    """Why a fork's pull request is not run in `sandbox_mode`, which does not isolate its code from the bot."""
    return (f"🔒 decode-bot did not run: this pull request comes from a fork, and a fork's code runs only in an "
            f"isolating sandbox ({', '.join(ISOLATING)}). This installation runs SANDBOX_MODE={sandbox_mode}, "
            "which would give the fork's code the bot's own access; ask its operator to switch, or push the "
            "branch to this repository.")


def edited_note(work: Work, now: IssueInfo | None) -> str | None:
    """A note for the report when the issue or pull request (`now`, as GitHub has it) was edited after the event
    that started the job; None when the event carried no text or the text is the same."""
    if isinstance(work, Dispatch | Labels | Allow) or work.title is None or now is None:
        return None

    def same(a: str | None, b: str | None) -> bool:
        return (a or "").replace("\r\n", "\n").strip() == (b or "").replace("\r\n", "\n").strip()

    if same(now.title, work.title) and same(now.body, work.body):
        return None
    what = "pull request" if now.is_pull else "issue"
    when = ("it was labeled", "as it was when labeled") if work.kind == "issue" else \
        ("the review was submitted", "as it was then") if isinstance(work, Review) else \
        ("the command was posted", "as it was when the command was posted")
    return (f"ℹ️ The {what} was edited after {when[0]}; decode-bot worked on the text {when[1]}. "
            f"Run it again to work on the current text.")


def _plan(work: Work, facts: Facts, *, tag: str) -> Plan:
    """Where `work` starts, lands and goes, given `facts`."""
    login = work.sender_login
    co_author = f"{login} <{login}@users.noreply.github.com>" if login else None
    repo, issue, pull = facts.repo, facts.issue, facts.pull
    if isinstance(work, Dispatch):
        return Plan(task=build_task(work, issue_title="", issue_body=None), branch=run_branch(tag),
                    base=work.base_ref, config_base=None, title=work.instructions, co_author=co_author,
                    delivery=OpenPull(base=work.base_ref or repo.default_branch, closes=None))
    if issue is None:
        raise ValueError(f"work on #{work.number} is planned with the facts of its issue")
    if isinstance(work, Labels):
        raise ValueError("making the trigger labels is not planned: the job makes them itself")
    if isinstance(work, Allow):
        return Plan(task="", branch=run_branch(tag), base=None, config_base=None, title="", co_author=co_author,
                    delivery=AllowHosts(work.hosts, repo.default_branch), mode=ALLOW)
    if isinstance(work, CheckSuite):
        if pull is None or facts.ci is None:
            raise ValueError(f"a CI fix of #{work.number} is planned with its pull request and failed checks")
        return _on_pull(work, pull, facts.ci.task, facts.ci.title, None)
    if isinstance(work, Continue):
        if pull is None or facts.resume is None:
            raise ValueError(f"a continuing run on #{work.number} is planned with its pull request and its runs")
        return Plan(task=continue_task(work, facts.resume), branch=pull.head_ref, base=pull.head_ref,
                    config_base=pull.base_ref, title=pull.title, co_author=co_author,
                    delivery=Resume(pull, facts.resume))
    issue = as_triggered(work, issue)
    task = build_task(work, issue_title=issue.title, issue_body=issue.body, is_pull=issue.is_pull,
                      pr_body=pull.body if pull and work.body is None else None, review=facts.review)
    if isinstance(work, Review):
        if pull is None:
            raise ValueError(f"review {work.review_id} is planned with the facts of pull request #{work.number}")
        threads = Threads(pull.number, work.review_id, tuple(dict.fromkeys(c.thread for c in facts.review)))
        return dataclasses.replace(_on_pull(work, pull, task, issue.title, co_author), threads=threads, mode=REVIEW)
    if pull is None:
        return _on_issue(work, facts, task, co_author)
    return _on_pull(work, pull, task, issue.title, co_author)


def _on_issue(work: Issue | Comment | ReviewComment | PlanRequest | Go, facts: Facts, task: str,
              co_author: str | None) -> Plan:
    """A new pull request resolving the issue; for `/decode plan`, the plan comment instead, and for `/decode go`,
    a task that holds the plan."""
    issue = as_triggered(work, facts.issue) if facts.issue is not None else None
    assert issue is not None
    opened = Plan(task=task, branch=issue_branch(issue.number, issue.title), base=None, config_base=None,
                  title=issue.title, co_author=co_author,
                  delivery=OpenPull(base=facts.repo.default_branch, closes=issue.number))
    if isinstance(work, PlanRequest):
        return dataclasses.replace(opened, task=planning_task(task), delivery=PlanComment(issue.number), mode=PLAN)
    if isinstance(work, Go):
        if facts.plan is None:
            raise ValueError(f"`go` on #{work.number} is planned with the issue's plan comment")
        assert isinstance(opened.delivery, OpenPull), "an issue's run opens a pull request"
        return dataclasses.replace(opened, task=go_task(task, facts.plan), mode=GO,
                                   delivery=dataclasses.replace(opened.delivery, plan_url=facts.plan.url))
    return opened


def _on_pull(work: Work, pull: PullInfo, task: str, title: str, co_author: str | None) -> Plan:
    """Commits on pull request `pull`: its own branch in this repository, or a fork's delivery."""
    if pull.same_repo(work.repo):
        return Plan(task=task, branch=pull.head_ref, base=pull.head_ref, config_base=pull.base_ref,
                    title=title, co_author=co_author,
                    delivery=PushToPull(pull.number, stateful=read_state(pull.body) is not None))
    # a fork's head, fetched from the base repository; its decode.yml never applies
    return Plan(task=task, branch=pull.head_ref, base=f"refs/pull/{pull.number}/head",
                config_base=pull.base_ref, title=title, co_author=co_author, delivery=ToFork(pull))


def as_triggered(work: Issue | Comment | ReviewComment | Review | PlanRequest | Go, issue: IssueInfo) -> IssueInfo:
    """`issue` with the title and body the event carried, when it carried them: the job works on the text
    the maintainer saw when they triggered it, not on what its author changed it to since."""
    if work.title is None:
        return issue
    return dataclasses.replace(issue, title=work.title, body=work.body or "")
