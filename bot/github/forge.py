"""The `Forge` boundary: every GitHub REST operation decode-bot makes, in one place.

Each operation runs under the one retry policy (`GitHubRetry`). Writes that are
not idempotent on GitHub's side (a comment, a pull request) are made safe to
retry: before a second attempt we look for what the first may have created, so
a 502 that hid a success never doubles it.
"""

from __future__ import annotations

import base64
from functools import partial
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import requests
from github import Github, GithubException, InputGitTreeElement
from github.GitCommit import GitCommit
from github.GitRef import GitRef
from github.GitTree import GitTree

from bot.core.errors import ConfigError, DecodeError, RateLimited
from bot.github.auth import Credentials, client
from bot.github import checks
from bot.github.git_tree import inline_text, tree_parts
from bot.github.checks import CommitIdentity, FailedChecks
from bot.github.forge_protocol import Forge  # noqa: F401 (the boundary's importers name it here, beside its implementation)
from bot.github.info import (
    CheckRunState, IssueInfo, MergedPull, NewCommit, PullInfo, PullRef, RepoInfo, ReviewCommentInfo, TreeEntry,
)
from bot.github.pacing import WritePacer
from bot.github.retry import GitHubRetry, rate_limit, requested_wait

T = TypeVar("T")


class GitHubForge:
    """`Forge` over PyGithub, authenticated per repository by `credentials`; every write goes through `pacer`."""

    def __init__(self, credentials: Credentials, *, retry: GitHubRetry | None = None,
                 pacer: WritePacer | None = None) -> None:
        self.credentials = credentials
        self.retry = retry or GitHubRetry()
        self.pacer = pacer or WritePacer()

    def _call(self, fn: Callable[[], T], *, writes: str | None = None) -> T:
        """`fn()` under the retry policy (no answer at all: a `DecodeError` saying what to check); a write (`writes`:
        its repository) waits for the pacer at each attempt, and a rate limit holds the account's writes back."""
        def attempt() -> T:
            if writes is None:
                return fn()
            self.pacer.acquire(_account(writes))
            try:
                return fn()
            except GithubException as e:
                self._heed(writes, e)
                raise
        try:
            return self.retry.call(attempt)
        except (requests.ConnectionError, requests.Timeout) as e:
            raise DecodeError(f"cannot reach GitHub at {self.credentials.api_url} ({type(e).__name__}): check "
                              "GITHUB_API_URL and the network") from None

    def _heed(self, repo: str, e: GithubException) -> None:
        """When `e` is GitHub's rate limit, every write of `repo`'s account waits as long as GitHub asks."""
        if (limit := rate_limit(e)) is not None:
            self.pacer.asked(_account(repo), requested_wait(e) or 60.0, limit)

    def _gh(self, repo: str) -> Github:
        return client(self.credentials, repo)

    def token_for(self, repo: str) -> str:
        return self.credentials.token_for(repo)

    def bot_login(self) -> str | None:
        return self.credentials.bot_login()

    def repository(self, repo: str) -> RepoInfo:
        def fetch() -> RepoInfo:  # the client is lazy: the GET happens at the first attribute, inside the retry
            r = self._gh(repo).get_repo(repo)
            return RepoInfo(r.full_name, r.default_branch, r.clone_url, r.html_url)
        try:
            return self._call(fetch)
        except GithubException as e:
            error = ConfigError if e.status in (401, 403, 404) else DecodeError  # a setting or input to fix
            raise error(access_problem(e, repo, self.credentials.api_url), status=e.status) from None

    def issue(self, repo: str, number: int) -> IssueInfo:
        def fetch() -> IssueInfo:
            i = self._gh(repo).get_repo(repo).get_issue(number)
            return IssueInfo(i.number, i.title or "", i.body or "", i.user.login, i.pull_request is not None,
                             i.html_url)
        return self._call(fetch)

    def pull(self, repo: str, number: int) -> PullInfo:
        def fetch() -> PullInfo:
            p = self._gh(repo).get_repo(repo).get_pull(number)
            head_repo = p.head.repo.full_name if p.head.repo is not None else None
            clone_url = p.head.repo.clone_url if p.head.repo is not None else None
            return PullInfo(p.number, p.title or "", p.body or "", p.head.ref, p.head.sha, head_repo,
                            p.base.ref, p.html_url, clone_url, bool(p.maintainer_can_modify))
        return self._call(fetch)

    def merged_pulls(self, repo: str, *, scan: int) -> Iterator[MergedPull]:
        """The merged pull requests of `repo`, most recently updated first, among its `scan` most recently
        updated closed ones (the closed-but-unmerged are passed over); each page is read under the retry."""
        pulls = self._gh(repo).get_repo(repo).get_pulls(state="closed", sort="updated", direction="desc")
        listed = iter(pulls)
        for _ in range(scan):
            p = self._call(lambda: next(listed, None))
            if p is None:
                return
            if p.merged_at is None or not p.merge_commit_sha:
                continue
            files = self._call(lambda: tuple((f.filename, f.status, f.previous_filename) for f in p.get_files()))
            yield MergedPull(p.number, p.title or "", p.body or "", p.base.sha, p.merge_commit_sha, files)

    def permission(self, repo: str, login: str) -> str:
        """The sender's base permission: admin, write, read or none.

        GitHub's `permission` field folds maintain into write and triage into read,
        and maps custom roles to their base
        (https://docs.github.com/en/rest/collaborators/collaborators#get-repository-permissions-for-a-user).
        """
        def fetch() -> str:
            try:
                data = self._gh(repo).get_repo(repo).get_collaborator_permission(login)
            except GithubException as e:
                if e.status == 404:  # not a collaborator of a private repository
                    return "none"
                raise
            return data
        return self._call(fetch)

    def react(self, repo: str, target: tuple[str, int], content: str = "eyes") -> None:
        """React to an issue or PR (`("issue", n)`), an issue comment or a review comment."""
        kind, ident = target

        def make() -> None:
            r = self._gh(repo).get_repo(repo)
            if kind == "issue":
                r.get_issue(ident).create_reaction(content)
            elif kind == "comment":
                r.get_issue(0).get_comment(ident).create_reaction(content)
            else:
                r.get_pull(0).get_review_comment(ident).create_reaction(content)
        self._call(make, writes=repo)  # adding the same reaction twice is harmless on GitHub

    def find_comment(self, repo: str, number: int, marker: str) -> int | None:
        """The oldest comment on issue/PR `number` that we wrote and whose body contains `marker`: of two that
        racing writers posted, the one they keep (`post_marked` in bot/github/tracking.py deletes the newer).

        Only our own comments count: anyone who may comment can copy a marker into theirs, to hide
        what we would post or to have us edit their comment.
        """
        found = self.find_comments(repo, number, marker)
        return found[0] if found else None

    def find_comments(self, repo: str, number: int, marker: str) -> list[int]:
        """Every comment on issue/PR `number` that we wrote and whose body contains `marker`, oldest first."""
        return self._call(lambda: self._ours(self._gh(repo).get_repo(repo).get_issue(number).get_comments(), marker))

    def comment_text(self, repo: str, number: int, marker: str) -> tuple[int, str, str] | None:
        """(id, body as it is now, html_url) of the comment `find_comment` finds, None when there is none."""
        def fetch() -> tuple[int, str, str] | None:
            comments = list(self._gh(repo).get_repo(repo).get_issue(number).get_comments())
            ids = self._ours(comments, marker)
            found = next((c for c in comments if ids and c.id == ids[0]), None)
            return (found.id, found.body or "", found.html_url) if found is not None else None
        return self._call(fetch)

    def _ours(self, comments: Iterable[Any], marker: str) -> list[int]:
        """The ids of `comments` that we wrote and that contain `marker`, in order."""
        me = (self.bot_login() or "").lower()
        return [c.id for c in comments
                if me and marker in (c.body or "") and c.user is not None and c.user.login.lower() == me]

    def post_comment(self, repo: str, number: int, body: str, marker: str) -> int:
        """Post `body` (which must contain `marker`) once, even when an attempt's answer was lost."""
        return self._once(repo, lambda: self._gh(repo).get_repo(repo).get_issue(number).create_comment(body).id,
                          lambda: self.find_comment(repo, number, marker))

    def _once(self, repo: str, create: Callable[[], int], find: Callable[[], int | None]) -> int:
        """`create()` (a write to `repo`) under the retry policy, made once: an attempt after one whose answer
        was lost first looks for what it may have made with `find()`."""
        attempts = 0

        def make() -> int:
            nonlocal attempts
            attempts += 1
            if attempts > 1 and (existing := find()) is not None:
                return existing
            return create()
        return self._call(make, writes=repo)

    def review_comments(self, repo: str, number: int, review_id: int) -> list[ReviewCommentInfo]:
        """Review `review_id`'s comments, in order (GET .../pulls/{n}/reviews/{id}/comments)."""
        def fetch() -> list[ReviewCommentInfo]:
            found = []
            for c in self._gh(repo).get_repo(repo).get_pull(number).get_single_review_comments(review_id):
                sent = c._rawData  # as sent: reading an absent field would make PyGithub GET the comment again
                line = sent.get("line") if sent.get("line") is not None else sent.get("original_line")
                found.append(ReviewCommentInfo(c.id, sent.get("in_reply_to_id") or c.id, (sent.get("user") or {})
                                               .get("login", ""), c.body or "", sent.get("path"), line,
                                               sent.get("diff_hunk")))
            return found
        return self._call(fetch)

    def find_review_comment(self, repo: str, number: int, marker: str) -> int | None:
        """The newest review comment on pull request `number` that we wrote and whose body contains `marker`."""
        found = self._call(lambda: self._ours(
            self._gh(repo).get_repo(repo).get_pull(number).get_review_comments(), marker))
        return found[-1] if found else None

    def reply_to_review_comment(self, repo: str, number: int, thread: int, body: str, marker: str) -> int:
        """Reply `body` (holding `marker`) in the thread whose first comment is `thread`, once even when an
        attempt's answer was lost; GitHub takes replies to a thread's first comment only."""
        return self._once(repo, lambda: self._gh(repo).get_repo(repo).get_pull(number).create_review_comment_reply(
            thread, body).id, lambda: self.find_review_comment(repo, number, marker))

    def file_at(self, repo: str, path: str, ref: str) -> bytes | None:
        """The file `path` on `ref`; None when there is none or it is not a file (read before any clone)."""
        def fetch() -> bytes | None:
            try:
                found = self._gh(repo).get_repo(repo).get_contents(path, ref=ref)
            except GithubException as e:
                if e.status == 404:
                    return None
                raise
            return None if isinstance(found, list) or found.type != "file" else found.decoded_content
        return self._call(fetch)

    def edit_comment(self, repo: str, comment_id: int, body: str, *, optional: bool = False) -> bool:
        """Edit comment `comment_id`; an `optional` one (progress) only when the pacer has room, tried once, never
        holding the run up. Whether it was edited."""
        edit = lambda: self._gh(repo).get_repo(repo).get_issue(0).get_comment(comment_id).edit(body)  # noqa: E731
        if not optional:
            self._call(edit, writes=repo)
            return True
        if not self.pacer.may_write(_account(repo)):
            return False
        try:
            edit()
        except GithubException as e:
            self._heed(repo, e)
            raise
        return True

    def delete_comment(self, repo: str, comment_id: int) -> None:
        """Delete our comment `comment_id` (one posted twice by two writers racing: bot/github/tracking.py)."""
        self._call(lambda: self._gh(repo).get_repo(repo).get_issue(0).get_comment(comment_id).delete(), writes=repo)

    def pull_commits(self, repo: str, number: int) -> list[CommitIdentity]:
        """The pull request's commits, oldest first, with who made them (GET .../pulls/{n}/commits)."""
        return self._call(lambda: [CommitIdentity.of(c.raw_data) for c in
                                   self._gh(repo).get_repo(repo).get_pull(number).get_commits()])

    def failed_checks(self, repo: str, head_sha: str, *, redact: Callable[[str], str]) -> FailedChecks:
        """The failing check runs of `head_sha`, with their output and Actions log tails (bot/github/checks.py)."""
        return self._call(lambda: checks.failed_checks(self._gh(repo).get_repo(repo), head_sha, redact=redact))

    def create_check_run(self, repo: str, head_sha: str, name: str, state: CheckRunState) -> int:
        """Create check run `name` on commit `head_sha` (https://docs.github.com/en/rest/checks/runs#create-a-check-run),
        once even when an attempt's answer was lost: a second attempt first looks for the run with the same
        `external_id` on that commit. Only an App's token (or Actions' GITHUB_TOKEN) may: others get a 403."""
        return self._once(repo, lambda: self._gh(repo).get_repo(repo).create_check_run(name, head_sha,
                                                                                   **state.fields()).id,
                          lambda: self.find_check_run(repo, head_sha, name, state.external_id))

    def edit_check_run(self, repo: str, check_run_id: int, state: CheckRunState) -> None:
        """Update check run `check_run_id` to `state` (PATCH .../check-runs/{id}; the same state twice is harmless)."""
        self._call(lambda: self._gh(repo).get_repo(repo).get_check_run(check_run_id).edit(**state.fields()),
                   writes=repo)

    def find_check_run(self, repo: str, head_sha: str, name: str, external_id: str) -> int | None:
        """The newest check run `name` on `head_sha` whose `external_id` is this one (a retried job's, or one
        made while the job waited), None when there is none."""
        def fetch() -> int | None:
            runs = self._gh(repo).get_repo(repo).get_commit(head_sha).get_check_runs(check_name=name, filter="all")
            return max((run.id for run in runs if run.external_id == external_id), default=None)
        return self._call(fetch)

    def ensure_label(self, repo: str, name: str, *, color: str, description: str) -> bool:
        """Create the label `name` on `repo` unless it exists (any case); True when it was created."""

        def make() -> bool:
            r = self._gh(repo).get_repo(repo)
            try:
                r.get_label(name).color  # the label is lazy: reading a field is the GET
                return False
            except GithubException as e:
                if e.status != 404:
                    raise
            try:
                r.create_label(name, color, description)
            except GithubException as e:
                if e.status == 422 and "already_exists" in str(e.data):
                    return False  # made meanwhile (a concurrent delivery, a person)
                raise
            return True
        return self._call(make, writes=repo)

    def open_or_update_pull(self, repo: str, *, head: str, base: str, title: str, body: str,
                            draft: bool) -> PullRef:
        """The open PR from `head` into `base` with this body: updated if it exists, else created."""
        owner = repo.split("/", 1)[0]

        def make() -> PullRef:
            r = self._gh(repo).get_repo(repo)
            for existing in r.get_pulls(state="open", head=f"{owner}:{head}", base=base):
                existing.edit(title=title, body=body)
                return PullRef(existing.number, existing.html_url, created=False)
            try:
                pr = r.create_pull(base=base, head=head, title=title, body=body, draft=draft)
            except GithubException as e:
                if e.status == 422 and "already exists" in str(e.data):
                    raise _Retry from None  # the PR appeared meanwhile: find it on the next attempt
                raise
            return PullRef(pr.number, pr.html_url, created=True)
        return self._call(make, writes=repo)

    def make_commit(self, repo: str, commit: NewCommit, *, branch: str, force: bool) -> str:
        """Make `commit` through GitHub's Git Database API and point `branch` at it (moving it only forward
        unless `force`); the new commit's sha. No author or committer is sent, so GitHub makes it as the
        token's identity and signs it (bot/github/api_commit.py). Blobs, trees and commits are content
        addressed, so each step is safe to retry. A rate limit that outlasts the retries is `RateLimited`."""
        try:
            return self._make_commit(repo, commit, branch=branch, force=force)
        except GithubException as e:
            if (limit := rate_limit(e)) is not None:
                raise RateLimited(f"GitHub's {limit} held the commit back past {self.retry.attempts} attempts",
                                  status=e.status) from None
            data = e.data if isinstance(e.data, dict) else {}
            said = "; ".join(filter(None, [str(data.get("message") or "")] + [
                str(x.get("message") or "") for x in data.get("errors") or [] if isinstance(x, dict)]))
            raise DecodeError(f"GitHub answered {e.status}{' ' + said if said else ''}", status=e.status) from None

    def commit_file(self, repo: str, *, base: str, branch: str, path: str, content: bytes, message: str) -> str:
        """A commit on branch `base`'s head changing only `path` (a regular file) to `content`, made through the
        Git Database API like `make_commit` (so GitHub signs it), with `branch` created or moved to it."""
        def parent() -> tuple[str, str]:
            r = self._gh(repo).get_repo(repo)
            sha = r.get_branch(base).commit.sha
            return sha, r.get_git_commit(sha).tree.sha
        sha, tree = self._call(parent)
        return self.make_commit(repo, NewCommit(sha, tree, message, (TreeEntry(path, "100644", content),), None),
                                branch=branch, force=True)

    def _make_commit(self, repo: str, commit: NewCommit, *, branch: str, force: bool) -> str:
        """A blob for each file that is not text, the tree in as few requests as `tree_parts` makes (text inline),
        the commit, the ref, whatever the number of files; the parent's tree and commit named, never fetched."""
        gh = self._gh(repo)
        r = gh.get_repo(repo)
        for entry in commit.entries:
            if entry.content is not None and inline_text(entry.content) is None:
                data = base64.b64encode(entry.content).decode()
                sha = self._call(partial(r.create_git_blob, data, "base64"), writes=repo).sha
                if entry.sha is not None and sha != entry.sha:
                    raise DecodeError(f"GitHub stored {entry.path} as the blob {sha[:12]}, not {entry.sha}")
        tree = gh.create_from_raw_data(GitTree, {"sha": commit.parent_tree})
        for part in tree_parts(commit.entries):
            elements = [InputGitTreeElement(**element) for element in part]
            tree = self._call(partial(r.create_git_tree, elements, tree), writes=repo)
        if commit.tree is not None and tree.sha != commit.tree:  # (an answer naming no tree is said as such)
            raise DecodeError(f"GitHub built the tree {(tree.sha or 'of no sha')[:12]}, not the commit's "
                              f"{commit.tree[:12]}")
        parent = gh.create_from_raw_data(GitCommit, {"sha": commit.parent})
        made = self._call(lambda: r.create_git_commit(commit.message, tree, [parent]).sha, writes=repo)
        self._call(lambda: self._point(gh, r, branch, made, force=force), writes=repo)
        return made

    @staticmethod
    def _point(gh: Github, r: Any, branch: str, sha: str, *, force: bool) -> None:
        """Create `branch` at `sha` or move it there (only forward unless `force`), in one request when the guess
        holds: a forced move is a run's own new branch (created first), a forward one a pull request's (moved)."""
        def create() -> bool:
            try:
                r.create_git_ref(f"refs/heads/{branch}", sha)
            except GithubException as e:
                if e.status == 422 and "already exists" in str(e.data):
                    return False
                raise
            return True

        if force and create():
            return
        try:
            ref = {"ref": f"refs/heads/{branch}", "url": f"{r.url}/git/refs/heads/{branch}"}
            gh.create_from_raw_data(GitRef, ref).edit(sha, force=force)  # named, never fetched: the PATCH alone
        except GithubException as e:
            if force or not (e.status == 422 and "does not exist" in str(e.data)):
                raise
            if not create():
                raise _Retry from None  # made meanwhile: move it on the next attempt


def _account(repo: str) -> str:
    """Whose write budget a write to `repo` spends: its owner's (an App's installation; one token's user)."""
    return repo.split("/", 1)[0]


class _Retry(GithubException):
    """A conflict that the next attempt resolves (it finds what the last one made)."""

    def __init__(self) -> None:
        super().__init__(503, {"message": "retrying after a conflict"}, None)


def access_problem(e: GithubException, repo: str, api_url: str) -> str:
    """One line on why GitHub refused to show `repo`, naming what to fix."""
    said = str((e.data or {}).get("message", "")) if isinstance(e.data, dict) else ""
    what = f"{e.status}{' ' + said if said else ''}"
    if e.status == 401:
        return f"the GitHub token was rejected by {api_url} ({what}): set a valid GITHUB_TOKEN (or GitHub App key)"
    if e.status in (403, 404):
        return (f"the repository {repo} cannot be read with this token ({what}): check the name, and that the "
                "token (or the App's installation) has access to it")
    return f"GitHub answered {what} for the repository {repo}"
