"""A piece of work: what one event asks decode-bot to do, as a closed union, and how a job stores it.

Each kind carries exactly the fields it has, so no code reads a field that means
nothing for its kind (a dispatch has no issue number, only a review comment has
a file and line). Code that differs by kind matches on the type, in three
places: the task text (bot/github/task_text.py), the plan (bot/github/plan.py) and the
comment the job reacts to (`reaction_target`). Every kind has `repo`,
`number` (None for a workflow run and for labels), `sender_login`, `sender_type` and `kind`,
the name logs, the store and the dashboard show. A `Review` holds no comments: the job fetches them.

`instructions`, titles, bodies, paths and hunks are raw user text: clean and
fence them before use (bot/core/text.py cleans, bot/github/task_text.py fences).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from bot.core import names


@dataclass(frozen=True)
class Issue:
    """An issue labeled with the trigger label, or `decode run --issue N`: resolve it in a new pull request.

    `title`/`body` are the text the event carried (None: it carried none, use GitHub's current text): the
    job works on what the maintainer saw when they triggered it, not on a later edit."""

    repo: str
    number: int
    sender_login: str
    sender_type: str = "User"
    title: str | None = None
    body: str | None = None
    instructions: str = ""  # `decode run --issue N "TASK"`: extra instructions from the command line
    kind: ClassVar[str] = "issue"


@dataclass(frozen=True)
class Comment:
    """A comment starting with the command in the conversation of an issue or a pull request."""

    repo: str
    number: int
    sender_login: str
    sender_type: str
    comment_id: int
    instructions: str
    is_pull_request: bool = False
    title: str | None = None
    body: str | None = None
    attempts: str | None = None  # `/decode attempts=N ...`: N as written (checked by the job, 1 to 5)

    @property
    def kind(self) -> str:
        return "pr_comment" if self.is_pull_request else "issue_comment"


@dataclass(frozen=True)
class _Command:
    """A command in a comment that names no more than its instructions (`continue`, `plan`, `go`). The fields'
    order is the queue's and the check run's encoding (`job_payload`, `check_ref`): a subclass adds its own
    after these."""

    repo: str
    number: int
    sender_login: str
    sender_type: str
    comment_id: int
    instructions: str = ""


@dataclass(frozen=True)
class Continue(_Command):
    """`/decode continue` on a pull request (or an issue, which is told where it works): a new run on a
    decode-bot pull request's branch, carrying on from its last run, which stopped incomplete. The job checks
    that the pull request is decode-bot's, that its last run stopped early, and that the stop is continued once
    (bot/github/resume.py); `instructions` are what follows the word `continue`."""

    is_pull_request: bool = True
    title: str | None = None
    body: str | None = None
    kind: ClassVar[str] = "continue"


@dataclass(frozen=True)
class _IssueCommand(_Command):
    """A command on an issue (`plan`, `go`)."""

    title: str | None = None
    body: str | None = None
    is_pull_request: ClassVar[bool] = False


@dataclass(frozen=True)
class PlanRequest(_IssueCommand):
    """`/decode plan [instructions]` on an issue: a planning run that changes nothing and answers with the plan,
    in the issue's plan comment (bot/github/planning.py)."""

    kind: ClassVar[str] = "plan"


@dataclass(frozen=True)
class Go(_IssueCommand):
    """`/decode go [instructions]` on an issue with a plan comment: resolve the issue as the plan (as it reads
    when the job starts) says, in a new pull request. Only a person may approve a plan."""

    kind: ClassVar[str] = "go"


@dataclass(frozen=True)
class Allow:
    """`/decode allow HOST ...` on an issue or pull request: a pull request adding `hosts` (as written, checked
    by the job) to `allow_domains` in the default branch's decode.yml. No agent runs."""

    repo: str
    number: int
    sender_login: str
    sender_type: str
    comment_id: int
    hosts: tuple[str, ...] = ()
    is_pull_request: bool = False
    kind: ClassVar[str] = "allow"
    title: ClassVar[None] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "hosts", tuple(self.hosts))  # a list when read back from the queue


@dataclass(frozen=True)
class ReviewComment:
    """A review comment starting with the command, on line `line` of `path` in a pull request's diff."""

    repo: str
    number: int
    sender_login: str
    sender_type: str
    comment_id: int
    instructions: str
    path: str | None = None
    line: int | None = None
    diff_hunk: str | None = None
    title: str | None = None
    body: str | None = None
    kind: ClassVar[str] = "review_comment"
    is_pull_request: ClassVar[bool] = True


@dataclass(frozen=True)
class Review:
    """A submitted pull request review, every comment of it one task (the job fetches the comments).

    `by_command`: its body starts with the command, and `instructions` are the rest; else it requests changes,
    `instructions` are its whole body, and the job runs it only on a decode-bot pull request whose base
    branch's decode.yml says `review_trigger: changes_requested` (`admit`, bot/github/plan.py)."""

    repo: str
    number: int
    sender_login: str
    sender_type: str
    review_id: int
    instructions: str
    by_command: bool = True
    title: str | None = None
    body: str | None = None
    kind: ClassVar[str] = "review"
    is_pull_request: ClassVar[bool] = True


@dataclass(frozen=True)
class CheckSuite:
    """A check suite failed on the head of pull request `number`: fix what makes the checks fail, on its
    branch. The job runs it only on a decode-bot pull request whose base branch's decode.yml sets `ci_fix`,
    while the head is still `head_sha`, no person pushed since, and rounds are left (`admit` in
    bot/github/plan.py).
    The sender is whoever GitHub names (often a bot): the authority is the repository's decode.yml."""

    repo: str
    number: int
    head_sha: str
    sender_login: str
    sender_type: str = "Bot"
    kind: ClassVar[str] = "ci_fix"
    is_pull_request: ClassVar[bool] = True
    title: ClassVar[None] = None


@dataclass(frozen=True)
class Dispatch:
    """A workflow run (`workflow_dispatch` with a prompt, or a `schedule`): do `instructions`, starting from
    `base_ref` (None: the default branch), in a new pull request."""

    repo: str
    sender_login: str
    sender_type: str
    instructions: str
    base_ref: str | None = None
    kind: ClassVar[str] = "dispatch"
    number: ClassVar[None] = None


@dataclass(frozen=True)
class Labels:
    """The App was installed on `repos` (an installation created, repositories added to one): create the
    trigger label in each where it is missing. No agent runs."""

    repos: tuple[str, ...]
    sender_login: str
    sender_type: str = "User"
    kind: ClassVar[str] = "labels"
    number: ClassVar[None] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "repos", tuple(self.repos))  # a list when read back from the queue

    @property
    def repo(self) -> str:
        """The first repository, for logs and the job key."""
        return self.repos[0]


Work = Issue | Comment | Continue | PlanRequest | Go | Allow | ReviewComment | Review | CheckSuite | Dispatch | Labels
_BY_KIND: dict[str, type[Work]] = {
    "issue": Issue, "issue_comment": Comment, "pr_comment": Comment, "continue": Continue,
    "plan": PlanRequest, "go": Go, "allow": Allow,
    "review_comment": ReviewComment,
    "review": Review, "ci_fix": CheckSuite, "dispatch": Dispatch, "labels": Labels,
}


def reaction_target(work: Issue | Comment | Continue | PlanRequest | Go | Allow | ReviewComment | Review | CheckSuite
                    ) -> tuple[str, int] | None:
    """What the job puts its 👀 on: the comment that asked, or the labeled issue. None for a review: GitHub
    has no reactions on reviews (https://docs.github.com/en/rest/reactions), and one on a single comment
    would read as "only this one"; the tracking comment on the pull request acknowledges it. None for a
    failed check suite too: nobody asked."""
    match work:
        case Comment() | Continue() | PlanRequest() | Go() | Allow():
            return ("comment", work.comment_id)
        case ReviewComment():
            return ("review_comment", work.comment_id)
        case Issue():
            return ("issue", work.number)
        case Review() | CheckSuite():
            return None


def asked_by(work: Work) -> str:
    """A stable name for the request itself, so a refusal is answered once however often it comes."""
    match work:
        case Comment() | Continue() | PlanRequest() | Go() | Allow() | ReviewComment():
            return str(work.comment_id)
        case Review():
            return f"review-{work.review_id}"
        case _:
            return f"{work.kind}-{work.number}-{work.sender_login}"


# -- jobs: work stored in the queue and read back --------------------------------


def job_key(work: Work) -> str:
    """Jobs with the same key never run at the same time: one issue or PR, one agent."""
    return names.job_key(work.repo, "labels" if isinstance(work, Labels) else work.number)


def job_payload(work: Work, event: str, delivery: str, installation: int | None = None) -> dict[str, Any]:
    """What the store keeps for a job: the work with its kind, the delivery it came from and the App
    installation that sent it (None: none did), which its caps and its turn in the queue count against."""
    return {"work": {"kind": work.kind, **dataclasses.asdict(work)}, "event": event, "delivery": delivery,
            "installation": installation}


def work_of(payload: Mapping[str, Any]) -> Work:
    """The `Work` stored by `job_payload`. A job stored by an older version (a flat `trigger` with every
    field) reads too: fields its kind does not have are dropped."""
    fields = dict(payload["work"] if "work" in payload else payload["trigger"])
    cls = _BY_KIND[fields.pop("kind")]
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in fields.items() if k in names})


CHECK_NAME = "decode-bot"  # the name of every run's check run (bot/github/check_run.py)


def check_ref(work: Work, tag: str) -> str:
    """The `external_id` of the run's check run: the run's tag (a retried job finds its check run by it) and
    the work without its title and body (a re-run reads GitHub's current text), so "Re-run" on the check
    run (`check_run.rerequested`) can start the same work again with no store to look it up in."""
    fields = {k: v for k, v in dataclasses.asdict(work).items()
              if k not in ("title", "body", "sender_login", "sender_type")}
    return json.dumps({"tag": tag, "work": {"kind": work.kind, **fields}}, separators=(",", ":"))


def work_of_check(external_id: str, sender_login: str, sender_type: str) -> Work | None:
    """The work `check_ref` wrote into `external_id`, asked again by `sender_login`; None when the id is not
    one of ours (malformed, or another kind of value)."""
    try:
        fields = json.loads(external_id)["work"]
        return work_of({"work": {**fields, "sender_login": sender_login, "sender_type": sender_type}})
    except (ValueError, KeyError, TypeError):
        return None
