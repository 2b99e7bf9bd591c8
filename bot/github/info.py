"""What GitHub says about a repository, an issue, a pull request and a review comment, as plain values.

The `Forge` (bot/github/forge.py) returns them; the pure layers (the plan, the task text) read them
without importing the client.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

GITHUB_COMMITTER = ("GitHub", "noreply@github.com")  # the committer of the commits GitHub signs itself


@dataclass(frozen=True)
class RepoInfo:
    full_name: str
    default_branch: str
    clone_url: str
    html_url: str


@dataclass(frozen=True)
class IssueInfo:
    number: int
    title: str
    body: str
    author: str
    is_pull: bool
    html_url: str


@dataclass(frozen=True)
class PullInfo:
    number: int
    title: str
    body: str
    head_ref: str
    head_sha: str
    head_repo: str | None  # None when the fork was deleted
    base_ref: str
    html_url: str
    head_clone_url: str | None = None
    maintainer_can_modify: bool = False  # "Allow edits by maintainers" on a fork's pull request

    def same_repo(self, repo: str) -> bool:
        return self.head_repo == repo


@dataclass(frozen=True)
class ReviewCommentInfo:
    """One comment of a review; `thread` is the id of its thread's first comment, the one replies go under."""

    id: int
    thread: int
    author: str
    body: str
    path: str | None
    line: int | None
    diff_hunk: str | None


@dataclass(frozen=True)
class PullRef:
    number: int
    html_url: str
    created: bool


@dataclass(frozen=True)
class MergedPull:
    """A merged pull request as `decode eval --from-history` reads it: the commit it started from
    (`base_sha`), the commit it merged as, and each changed file as (path, status, previous path)."""

    number: int
    title: str
    body: str
    base_sha: str
    merge_sha: str
    files: tuple[tuple[str, str, str | None], ...]


@dataclass(frozen=True)
class TreeEntry:
    """One path a commit changes, as GitHub's "create a tree" takes it: `mode` 100644, 100755 or 120000
    (a symlink, whose content is its target); `content` None deletes the path; `sha` is the blob git made of
    `content`, which GitHub's must equal."""

    path: str
    mode: str
    content: bytes | None
    sha: str | None = None


@dataclass(frozen=True)
class NewCommit:
    """A commit to make through GitHub's Git Database API: `entries` over the `parent`'s tree
    (`parent_tree`), with the `message` the bot wrote; `tree` is the tree sha git computed for it, which
    GitHub's must equal (None: made without a clone, nothing to compare with)."""

    parent: str
    parent_tree: str
    message: str
    entries: tuple[TreeEntry, ...]
    tree: str | None


@dataclass(frozen=True)
class CheckRunState:
    """What a check run shows (https://docs.github.com/en/rest/checks/runs#create-a-check-run): `status`
    `queued`, `in_progress` or `completed` (then with a `conclusion`), the output's title, summary and text,
    the page its "Details" link opens and the `external_id` that finds it again and re-runs its work."""

    status: str
    title: str
    summary: str
    text: str = ""
    conclusion: str | None = None
    details_url: str | None = None
    external_id: str = ""

    def fields(self) -> dict[str, Any]:
        """The check run's fields as PyGithub's `create_check_run` and `CheckRun.edit` take them."""
        output = {"title": self.title, "summary": self.summary, **({"text": self.text} if self.text else {})}
        fields: dict[str, Any] = {"status": self.status, "external_id": self.external_id, "output": output}
        if self.details_url:
            fields["details_url"] = self.details_url
        if self.conclusion is not None:
            fields["conclusion"] = self.conclusion
        return fields
