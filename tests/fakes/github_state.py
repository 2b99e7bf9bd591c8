"""The state of the fake GitHub: users, repositories (bare git repos), issues, pulls, comments, tokens.

Tests arrange it with the `add_*` helpers and read it back with the accessors,
which answer plain dicts shaped like the REST API's (see `github_rest`).
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.fakes import github_rest as rest
from tests.fakes.github_auth import ApiError, GitHubApp, Token, bad_credentials, looks_like_jwt, new_token
from tests.fakes.github_rest import now_iso

ROLES = ("none", "read", "triage", "write", "maintain", "admin")
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Fake GitHub", "GIT_AUTHOR_EMAIL": "fake@github.invalid",
    "GIT_COMMITTER_NAME": "Fake GitHub", "GIT_COMMITTER_EMAIL": "fake@github.invalid",
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "PATH": "/usr/local/bin:/usr/bin:/bin",
}

# GitHub refuses pushes that add or change workflows unless the token may write them
# (an App's `workflows` permission, a PAT's `workflow` scope; never the Actions token).
WORKFLOW_HOOK = """#!/bin/sh
[ "${FAKE_GITHUB_WORKFLOWS:-1}" = 1 ] && exit 0  # unset: a test arranging the repository
while read old new ref; do
  [ "$new" = 0000000000000000000000000000000000000000 ] && continue
  for c in $(git rev-list "$new" --not --all); do
    f=$(git diff-tree --no-commit-id --name-only -r --root "$c" | grep '^\\.github/workflows/' | head -n 1)
    if [ -n "$f" ]; then
      echo "refusing to allow a GitHub App to create or update workflow \\`$f\\` without \\`workflows\\` permission" >&2
      exit 1
    fi
  done
done
"""


@dataclass
class Repo:
    owner: str
    name: str
    id: int
    private: bool
    default_branch: str
    path: Path
    fork_of: tuple[str, str] | None = None
    permissions: dict[str, str] = field(default_factory=dict)
    next_number: int = 1
    issues: dict[int, dict] = field(default_factory=dict)  # pull requests too, like GitHub
    pulls: dict[int, dict] = field(default_factory=dict)
    labels: dict[str, dict] = field(default_factory=dict)  # lower-cased name -> {"name", "color", "description"}

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


def git(cwd: Path, *args: str) -> str:
    """Run git in `cwd`; return its stdout."""
    return subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True,
                          text=True).stdout.strip()


class GitHubState:
    """Everything the fake GitHub knows; `FakeGitHub` serves it over HTTP."""

    api_url: str
    web_url: str

    def __init__(self, app_id: int = 424242) -> None:
        self.app = GitHubApp(app_id)
        self.installation_id = 7_000_001
        # what the installation was granted (the manifest's asks); an App installed before it asked for one
        # (say `checks`) lacks it until the owner accepts the new permissions
        self.installation_permissions = {"contents": "write", "issues": "write", "pull_requests": "write",
                                         "metadata": "read", "actions": "read", "checks": "write"}
        self.root = Path(tempfile.mkdtemp(prefix="fake-github-"))
        self.users: dict[str, dict] = {}
        self.repos: dict[str, Repo] = {}
        self.issue_comments: dict[int, dict] = {}  # by id
        self.review_comments: dict[int, dict] = {}
        self.reviews: dict[int, dict] = {}  # by id: repo, number, body, state, user, commit_id, submitted_at
        self.reaction_list: list[dict] = []
        self.api_commits: dict[str, dict] = {}  # sha -> repo, by (login), at, signed: commits made through the API
        self.tokens: dict[str, Token] = {}
        self.minted: list[dict] = []  # every installation token minted: token, repositories, permissions
        self.lock = threading.RLock()
        self._ids = iter(range(100_001, 10**9))
        self.token_user = "github-actions[bot]"
        self.token = self.add_token(self.token_user, bot=True)
        self.add_user(self.app.bot_login, type="Bot")

    def git_url(self, owner: str, repo: str) -> str:
        """The clone URL of owner/repo on this server."""
        return f"{self.web_url}/{owner}/{repo}.git"

    # -- credentials -------------------------------------------------------------------------------------
    @property
    def app_id(self) -> int:
        return self.app.app_id

    @property
    def private_key_pem(self) -> str:
        return self.app.private_key_pem

    @property
    def bot_login(self) -> str:
        return self.app.bot_login

    def add_token(self, login: str, *, repositories: list[str] | None = None, bot: bool = False,
                  expires_in: float | None = None) -> str:
        """A new token acting as `login` (a PAT, or a bot token writing wherever it reaches)."""
        self.add_user(login, type="Bot" if login.endswith("[bot]") else "User")
        value = new_token("ghs_" if bot else "ghp_")
        expires = time.time() + expires_in if expires_in is not None else None
        self.tokens[value] = Token(value, login, set(repositories) if repositories else None, expires, bot=bot)
        return value

    def mint_installation_token(self, repositories: list[str] | None, permissions: dict | None) -> Token:
        """What POST /app/installations/{id}/access_tokens does (repositories are names, not owner/name)."""
        names = None
        if repositories:
            names = set()
            for name in repositories:
                found = [r for r in self.repos.values() if r.name.lower() == name.lower()]
                if not found:
                    raise ApiError(422, "There is at least one repository that does not exist or is not "
                                        "accessible to the parent installation.")
                names |= {r.full_name for r in found}
        token = Token(new_token("ghs_"), self.bot_login, names, time.time() + 3600, self.installation_id,
                      dict(permissions or self.installation_permissions), bot=True)
        self.tokens[token.value] = token
        self.minted.append({"token": token.value, "repositories": sorted(names) if names else None,
                            "permissions": token.permissions, "expires_at": token.expires_at})
        return token

    def expire_tokens(self) -> None:
        """Make every installation token expired (to test re-minting)."""
        for token in self.tokens.values():
            if token.installation_id is not None:
                token.expires_at = time.time() - 1

    def authenticate(self, authorization: str, *, basic: bool = False) -> Token | Any:
        """The Token (or AppIdentity for a JWT) behind an Authorization header; ApiError(401) otherwise."""
        scheme, _, value = authorization.strip().partition(" ")
        value = value.strip()
        if not value:
            raise ApiError(401, "Requires authentication")
        if scheme.lower() == "basic":
            try:
                value = base64.b64decode(value).decode().partition(":")[2]
            except (ValueError, UnicodeDecodeError):
                raise bad_credentials() from None
        elif basic or scheme.lower() not in ("token", "bearer"):
            raise bad_credentials()
        elif looks_like_jwt(value):
            return self.app.verify(value)
        token = self.tokens.get(value)
        if token is None or (token.expires_at is not None and token.expires_at <= time.time()):
            raise bad_credentials()
        return token

    # -- state helpers for tests -------------------------------------------------------------------------
    def next_id(self) -> int:
        return next(self._ids)

    def add_user(self, login: str, type: str = "User") -> dict:
        """A user (or "Bot", or "Organization"); returns the stored record."""
        with self.lock:
            if login not in self.users:
                self.users[login] = {"login": login, "id": self.next_id(), "type": type}
            return self.users[login]

    def user(self, login: str) -> dict:
        return self.add_user(login, type="Bot" if login.endswith("[bot]") else "User")

    def add_repo(self, owner: str, name: str, files: dict[str, str] | str | Path | None = None, *,
                 default_branch: str = "main", private: bool = False, fork_of: tuple[str, str] | None = None) -> Repo:
        """A bare repository from `files` (one commit) or a clone of a local repository path."""
        self.user(owner)
        bare = self.root / owner / f"{name}.git"
        bare.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(files, (str, Path)):
            subprocess.run(["git", "clone", "-q", "--bare", str(files), str(bare)], env=GIT_ENV, check=True,
                           capture_output=True)
        else:
            git(bare.parent, "init", "-q", "--bare", "-b", default_branch, bare.name)
            work = Path(tempfile.mkdtemp(prefix="fake-github-work-"))
            git(work, "init", "-q", "-b", default_branch)
            for path, text in (files or {"README.md": f"# {name}\n"}).items():
                (work / path).parent.mkdir(parents=True, exist_ok=True)
                (work / path).write_text(text)
            git(work, "add", "-A")
            git(work, "commit", "-q", "-m", "Initial commit")
            git(work, "push", "-q", str(bare), f"HEAD:refs/heads/{default_branch}")
            shutil.rmtree(work, ignore_errors=True)
        git(bare, "symbolic-ref", "HEAD", f"refs/heads/{default_branch}")
        git(bare, "config", "http.receivepack", "true")
        hook = bare / "hooks" / "pre-receive"
        hook.parent.mkdir(exist_ok=True)
        hook.write_text(WORKFLOW_HOOK)
        hook.chmod(0o755)
        repo = Repo(owner, name, self.next_id(), private, default_branch, bare, fork_of)
        with self.lock:
            self.repos[repo.full_name.lower()] = repo
        return repo

    def add_fork(self, owner: str, repo: str, fork_owner: str, name: str | None = None) -> Repo:
        """A fork of owner/repo under `fork_owner`, with the same branches."""
        base = self.repo(owner, repo)
        return self.add_repo(fork_owner, name or repo, base.path, default_branch=base.default_branch,
                             private=base.private, fork_of=(owner, repo))

    def repo(self, owner: str, name: str) -> Repo:
        found = self.repos.get(f"{owner}/{name}".lower())
        if found is None:
            raise KeyError(f"fake GitHub has no repository {owner}/{name}")
        return found

    def may_push(self, repo: Repo, token: Token, refs: list[str] | None) -> bool:
        """Whether `token` may update `refs` of `repo` (None: any ref, for the advertisement).

        A bot token writes where it reaches, except into someone else's fork; people need write
        access. Into a fork's head branch also whoever may write to the base repository of an open
        pull request that allows edits by maintainers (an App's installation token included, the
        Actions token not), as GitHub allows
        (https://docs.github.com/en/pull-requests/collaborating-with-pull-requests/working-with-forks/allowing-changes-to-a-pull-request-branch-created-from-a-fork).
        """
        writers = ("write", "maintain", "admin")
        if self.role(repo, token.login) in writers or (token.bot and repo.fork_of is None):
            return True
        branches = set()
        for base in self.repos.values():
            for number, pull in base.pulls.items():
                if ((pull["head_owner"], pull["head_name"]) == (repo.owner, repo.name)
                        and pull.get("maintainer_can_modify") and base.issues[number]["state"] == "open"
                        and token.reaches(base.full_name)
                        and (token.installation_id is not None or self.role(base, token.login) in writers)):
                    branches.add(f"refs/heads/{pull['head_ref']}")
        return bool(branches) and (refs is None or set(refs) <= branches)

    def set_permission(self, owner: str, repo: str, login: str, role: str) -> None:
        """The role of `login` on owner/repo: admin, maintain, write, triage, read or none."""
        assert role in ROLES, role
        self.user(login)
        self.repo(owner, repo).permissions[login] = role

    def role(self, repo: Repo, login: str) -> str:
        """`login`'s role on `repo`: owners are admins; on a public repo everyone reads."""
        if login == repo.owner:
            return "admin"
        if login in repo.permissions:
            return repo.permissions[login]
        return "none" if repo.private else "read"

    def add_issue(self, owner: str, repo: str, title: str, body: str = "", *, user: str = "octocat",
                  labels: list[str] = ()) -> int:
        """An open issue; returns its number (shared with pull requests)."""
        with self.lock:
            r = self.repo(owner, repo)
            number, r.next_number = r.next_number, r.next_number + 1
            r.issues[number] = {"number": number, "id": self.next_id(), "title": title, "body": body,
                                "user": self.user(user)["login"], "labels": list(labels), "state": "open",
                                "created_at": now_iso(), "updated_at": now_iso(), "closed_at": None}
            return number

    def add_pull(self, owner: str, repo: str, title: str, body: str = "", *, head_branch: str,
                 base_branch: str | None = None, user: str = "octocat", head_repo: tuple[str, str] | None = None,
                 draft: bool = False, maintainer_can_modify: bool = False) -> int:
        """An open pull request from head_repo:head_branch (a fork or the repo itself); returns its number.

        `maintainer_can_modify` is the fork's "Allow edits by maintainers": people with write access to
        the base repository (and its App's installation tokens) may then push to that head branch.
        """
        with self.lock:
            r = self.repo(owner, repo)
            head = self.repo(*(head_repo or (owner, repo)))
            self.branch_sha(head.owner, head.name, head_branch)
            number = self.add_issue(owner, repo, title, body, user=user)
            r.pulls[number] = {"head_owner": head.owner, "head_name": head.name, "head_ref": head_branch,
                               "base_ref": base_branch or r.default_branch, "draft": draft, "merged": False,
                               "maintainer_can_modify": maintainer_can_modify}
            self.sync_pull_refs(head)
            return number

    def add_merged_pull(self, owner: str, repo: str, title: str, body: str = "", *, files: dict[str, str],
                        user: str = "octocat") -> int:
        """A pull request that committed `files` on the default branch and was merged (fast-forward):
        closed, with its `merged_at`, its base commit and its merge commit; returns its number."""
        r = self.repo(owner, repo)
        base_sha = self.branch_sha(owner, repo, r.default_branch)
        branch = f"contrib-{r.next_number}"
        head = self.push_branch(owner, repo, branch, files)
        number = self.add_pull(owner, repo, title, body, head_branch=branch, user=user)
        git(r.path, "update-ref", f"refs/heads/{r.default_branch}", head)
        with self.lock:
            r.pulls[number].update(merged=True, merged_at=now_iso(), base_sha=base_sha, merge_sha=head)
            r.issues[number].update(state="closed", closed_at=now_iso())
        return number

    def add_comment(self, owner: str, repo: str, number: int, body: str, *, user: str = "octocat") -> int:
        """An issue comment (on an issue or a pull request); returns its id."""
        with self.lock:
            self.repo(owner, repo).issues[number]  # noqa: B018 - KeyError for a missing issue
            cid = self.next_id()
            self.issue_comments[cid] = {"id": cid, "repo": f"{owner}/{repo}".lower(), "number": number, "body": body,
                                  "user": self.user(user)["login"], "created_at": now_iso(), "updated_at": now_iso()}
            return cid

    def add_review_comment(self, owner: str, repo: str, number: int, body: str, *, path: str, line: int,
                           user: str = "octocat", diff_hunk: str = "@@ -1 +1 @@", side: str = "RIGHT",
                           in_reply_to: int | None = None, review_id: int | None = None) -> int:
        """A pull request review comment on `path` at `line` (in review `review_id`, else one of its own)."""
        with self.lock:
            r = self.repo(owner, repo)
            pull = r.pulls[number]
            cid = self.next_id()
            sha = self.branch_sha(pull["head_owner"], pull["head_name"], pull["head_ref"])
            self.review_comments[cid] = {
                "id": cid, "repo": r.full_name.lower(), "number": number, "body": body,
                "user": self.user(user)["login"], "path": path, "line": line, "side": side, "diff_hunk": diff_hunk,
                "commit_id": sha, "in_reply_to_id": in_reply_to, "review_id": review_id or self.next_id(),
                "created_at": now_iso(), "updated_at": now_iso()}
            return cid

    def add_review(self, owner: str, repo: str, number: int, body: str | None, *, user: str = "octocat",
                   state: str = "COMMENTED", comments: list[dict] = ()) -> tuple[int, list[int]]:
        """A submitted review of pull request `number` with `comments` (each the keyword arguments of
        `add_review_comment`: body, path, line...); returns the review id and the comment ids."""
        with self.lock:
            pull = self.repo(owner, repo).pulls[number]
            rid = self.next_id()
            self.reviews[rid] = {"id": rid, "repo": f"{owner}/{repo}".lower(), "number": number, "body": body,
                                 "state": state, "user": self.user(user)["login"], "submitted_at": now_iso(),
                                 "commit_id": self.branch_sha(pull["head_owner"], pull["head_name"], pull["head_ref"])}
            return rid, [self.add_review_comment(owner, repo, number, user=user, review_id=rid, **c) for c in comments]

    def commit_message(self, owner: str, repo: str, sha: str) -> str:
        """The full message of commit `sha` in the bare repository."""
        return git(self.repo(owner, repo).path, "log", "-1", "--format=%B", sha)

    def branch_sha(self, owner: str, repo: str, branch: str) -> str:
        """The commit `branch` points to in the bare repository (KeyError when it does not exist)."""
        try:
            return git(self.repo(owner, repo).path, "rev-parse", "--verify", "-q", f"refs/heads/{branch}^{{commit}}")
        except subprocess.CalledProcessError:
            raise KeyError(f"{owner}/{repo} has no branch {branch!r}") from None

    def push_branch(self, owner: str, repo: str, branch: str, files: dict[str, str],
                    start: str | None = None) -> str:
        """Commit `files` on top of `start` (default branch) as `branch`, as a contributor's push would."""
        r = self.repo(owner, repo)
        work = Path(tempfile.mkdtemp(prefix="fake-github-push-"))
        try:
            git(work, "clone", "-q", "-b", start or r.default_branch, str(r.path), ".")
            for path, text in files.items():
                (work / path).parent.mkdir(parents=True, exist_ok=True)
                (work / path).write_text(text)
            git(work, "add", "-A")
            git(work, "commit", "-q", "-m", f"Work on {branch}")
            git(work, "push", "-q", str(r.path), f"HEAD:refs/heads/{branch}")
            self.sync_pull_refs(r)
            return git(work, "rev-parse", "HEAD")
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def file(self, owner: str, repo: str, branch: str, path: str) -> str:
        """The text of `path` on `branch` in the bare repository."""
        return subprocess.run(["git", "show", f"refs/heads/{branch}:{path}"], cwd=self.repo(owner, repo).path,
                              env=GIT_ENV, check=True, capture_output=True, text=True).stdout

    def sync_pull_refs(self, head: Repo) -> None:
        """Point refs/pull/N/head at the head branch of every open pull request from `head` (as GitHub does):
        one fetch per base repository, so a push costs the same however many pulls there are."""
        branches = set(git(head.path, "for-each-ref", "--format=%(refname:strip=2)", "refs/heads").splitlines())
        for base in list(self.repos.values()):
            specs = [f"+refs/heads/{pull['head_ref']}:refs/pull/{number}/head" for number, pull in base.pulls.items()
                     if (pull["head_owner"], pull["head_name"]) == (head.owner, head.name)
                     and pull["head_ref"] in branches]
            if specs:
                subprocess.run(["git", "fetch", "-q", "--no-tags", str(head.path), *specs], cwd=base.path,
                               env=GIT_ENV, capture_output=True)

    # -- accessors (plain dicts, as the REST API renders them), under the lock: a test reads while the
    # server's request threads write, and a dict that grows under an iteration fails it
    def issue(self, owner: str, repo: str, number: int) -> dict:
        with self.lock:
            return rest.render_issue(self, self.repo(owner, repo), number)

    def pull(self, owner: str, repo: str, number: int) -> dict:
        with self.lock:
            return rest.render_pull(self, self.repo(owner, repo), number)

    def pulls(self, owner: str, repo: str, state: str = "all") -> list[dict]:
        with self.lock:
            r = self.repo(owner, repo)
            return [self.pull(owner, repo, n) for n in sorted(r.pulls)
                    if state == "all" or r.issues[n]["state"] == state]

    def comments(self, owner: str, repo: str, number: int) -> list[dict]:
        """Issue comments on issue or pull request `number`, oldest first."""
        key = f"{owner}/{repo}".lower()
        with self.lock:
            return [rest.render_comment(self, c) for c in self.issue_comments.values()
                    if (c["repo"], c["number"]) == (key, number)]

    def review_comments_on(self, owner: str, repo: str, number: int) -> list[dict]:
        key = f"{owner}/{repo}".lower()
        with self.lock:
            return [rest.render_review_comment(self, c) for c in self.review_comments.values()
                    if (c["repo"], c["number"]) == (key, number)]

    def reactions(self, owner: str, repo: str, *, issue: int | None = None, comment: int | None = None,
                  review_comment: int | None = None) -> list[dict]:
        """Reactions on an issue/PR, an issue comment or a review comment: dicts with content and user."""
        if issue is not None:
            subject = ("issue", f"{owner}/{repo}".lower(), issue)
        else:
            subject = ("comment", comment) if comment is not None else ("review_comment", review_comment)
        with self.lock:
            return [rest.render_reaction(self, x) for x in self.reaction_list if x["subject"] == subject]
