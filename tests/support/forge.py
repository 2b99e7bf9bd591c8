"""An in-process `Forge`: the GitHub job's steps tested without HTTP.

It keeps comments, reactions and permissions in memory and raises what the real
forge raises: a `GithubException` for a refused call (`refuse`), a `ConfigError`
from the repository preflight. The HTTP fake (tests/fakes/github.py) stays the
contract test of the real `GitHubForge`; this one only has to be the same shape.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from github import GithubException

from bot.core.errors import ConfigError, DecodeError
from bot.github.info import CheckRunState, IssueInfo, NewCommit, PullInfo, PullRef, RepoInfo, ReviewCommentInfo

BOT = "decode-bot[bot]"
WEB = "https://web.example"


@dataclass
class Comment:
    id: int
    number: int
    body: str
    author: str = BOT


@dataclass
class Pull:
    """A pull request as the bot opened it; `edits` counts the times it was updated since."""

    number: int
    head: str
    base: str
    title: str
    body: str
    draft: bool
    html_url: str
    edits: int = 0


@dataclass
class MemoryForge:
    repo: str = "octo/calendar"
    permissions: dict[str, str] = field(default_factory=dict)
    issues: dict[int, IssueInfo] = field(default_factory=dict)
    comments: list[Comment] = field(default_factory=list)
    reactions: list[tuple[tuple[str, int], str]] = field(default_factory=list)
    refusals: dict[str, int] = field(default_factory=dict)  # method name -> HTTP status it answers
    edits: list[tuple[int, str]] = field(default_factory=list)  # (comment id, new body), in order
    pulls: list[Pull] = field(default_factory=list)
    reviews: dict[int, list[ReviewCommentInfo]] = field(default_factory=dict)  # review id -> its comments
    replies: list[tuple[int, Comment]] = field(default_factory=list)  # (thread's first comment id, our reply)
    files: dict[tuple[str, str], bytes] = field(default_factory=dict)  # (path, ref) -> content
    check_runs: dict[int, tuple[str, list[CheckRunState]]] = field(default_factory=dict)  # id -> (head, states)
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))

    def refuse(self, method: str, status: int) -> "MemoryForge":
        self.refusals[method] = status
        return self

    def _check(self, method: str) -> None:
        if method in self.refusals:
            status = self.refusals[method]
            raise GithubException(status, {"message": {401: "Bad credentials", 404: "Not Found"}.get(status, "no")}, {})

    def token_for(self, repo: str) -> str:
        return "ghs_memory"

    def bot_login(self) -> str | None:
        return BOT

    def repository(self, repo: str) -> RepoInfo:
        if (status := self.refusals.get("repository")) is not None:
            raise ConfigError(f"the repository {repo} cannot be read with this token ({status})", status=status)
        return RepoInfo(repo, "main", f"https://git.example/{repo}.git", f"{WEB}/{repo}")

    def issue(self, repo: str, number: int) -> IssueInfo:
        self._check("issue")
        if number not in self.issues:  # as GitHub answers a number the repository does not have
            raise GithubException(404, {"message": "Not Found"}, {})
        return self.issues[number]

    def pull(self, repo: str, number: int) -> PullInfo:
        raise NotImplementedError("no pull requests in memory")

    def permission(self, repo: str, login: str) -> str:
        self._check("permission")
        return self.permissions.get(login, "none")

    def react(self, repo: str, target: tuple[str, int], content: str = "eyes") -> None:
        self._check("react")
        self.reactions.append((target, content))

    def post_comment(self, repo: str, number: int, body: str, marker: str) -> int:
        self._check("post_comment")
        comment = Comment(next(self._ids), number, body)
        self.comments.append(comment)
        return comment.id

    def edit_comment(self, repo: str, comment_id: int, body: str, *, optional: bool = False) -> bool:
        self._check("edit_comment")
        next(c for c in self.comments if c.id == comment_id).body = body
        self.edits.append((comment_id, body))
        return True

    def delete_comment(self, repo: str, comment_id: int) -> None:
        self._check("delete_comment")
        self.comments = [c for c in self.comments if c.id != comment_id]

    def find_comment(self, repo: str, number: int, marker: str) -> int | None:
        found = self.find_comments(repo, number, marker)
        return found[0] if found else None

    def comment_text(self, repo: str, number: int, marker: str) -> tuple[int, str, str] | None:
        found = self._ours(number, marker)
        return (found[0].id, found[0].body, f"{WEB}/{repo}/issues/{number}#issuecomment-{found[0].id}") \
            if found else None

    def find_comments(self, repo: str, number: int, marker: str) -> list[int]:
        return [c.id for c in self._ours(number, marker)]

    def _ours(self, number: int, marker: str) -> list[Comment]:
        """The bot's comments on `number` that carry `marker`, oldest first (as the forge finds them)."""
        return [c for c in self.comments if c.number == number and marker in c.body and c.author == BOT]

    def review_comments(self, repo: str, number: int, review_id: int) -> list[ReviewCommentInfo]:
        self._check("review_comments")
        return list(self.reviews.get(review_id, ()))

    def find_review_comment(self, repo: str, number: int, marker: str) -> int | None:
        found = [c.id for _, c in self.replies if c.number == number and marker in c.body]
        return found[-1] if found else None

    def reply_to_review_comment(self, repo: str, number: int, thread: int, body: str, marker: str) -> int:
        self._check("reply_to_review_comment")
        reply = Comment(next(self._ids), number, body)
        self.replies.append((thread, reply))
        return reply.id

    def file_at(self, repo: str, path: str, ref: str) -> bytes | None:
        return self.files.get((path, ref))

    def open_or_update_pull(self, repo: str, *, head: str, base: str, title: str, body: str,
                            draft: bool) -> PullRef:
        """As GitHub's: the open pull request from `head` into `base` gets the new title and body (its
        draft state stays); else one is opened, numbered after every issue and pull request."""
        self._check("open_or_update_pull")
        for pr in self.pulls:
            if (pr.head, pr.base) == (head, base):
                pr.title, pr.body, pr.edits = title, body, pr.edits + 1
                return PullRef(pr.number, pr.html_url, created=False)
        number = 1 + max([*self.issues, *(p.number for p in self.pulls)], default=0)
        pr = Pull(number, head, base, title, body, draft, f"{WEB}/{repo}/pull/{number}")
        self.pulls.append(pr)
        return PullRef(pr.number, pr.html_url, created=True)

    def make_commit(self, repo: str, commit: NewCommit, *, branch: str, force: bool) -> str:
        """No Git Database here: the commit goes by git, as on a host whose API refuses it."""
        raise DecodeError("GitHub answered 404 Not Found", status=404)

    def create_check_run(self, repo: str, head_sha: str, name: str, state: CheckRunState) -> int:
        self._check("create_check_run")
        check_id = next(self._ids)
        self.check_runs[check_id] = (head_sha, [state])
        return check_id

    def find_check_run(self, repo: str, head_sha: str, name: str, external_id: str) -> int | None:
        found = [i for i, (head, states) in self.check_runs.items()
                 if head == head_sha and states[0].external_id == external_id]
        return found[-1] if found else None

    def edit_check_run(self, repo: str, check_run_id: int, state: CheckRunState) -> None:
        self._check("edit_check_run")
        self.check_runs[check_run_id][1].append(state)
