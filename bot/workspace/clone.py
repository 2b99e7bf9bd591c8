"""The host side of a run's repository: a clean clone the sandbox never sees, and its copy that it does.

`prepare` clones the repository twice under the run directory (a URL from its mirror,
`bot.workspace.mirror`), and checks the tree out once, for the sandbox:

- `clean/`: the host's clone, without a working tree: its index holds the base
  (`git read-tree`), the agent's patch is checked and applied there
  (`git apply --cached`) and committed from it. Only the host runs git here, with hooks,
  fsmonitor and every global or system config disabled. The agent's work lands
  here as a validated patch (`Workspace.apply_patch`) and is committed by the bot;
  an entry the host will not carry (an outward symlink, a `.git` path, a file over
  DECODE_MAX_FILE_MB, a change to a Git LFS file...) is left out, named with its
  reason, and the rest kept (`bot.workspace.patch_check`, on agentd's own path rules). Submodules are
  checked out here and copied from here (`bot.workspace.submodules`); changes inside them are never
  carried (agentd's `handback.Stage`).
- `workspace/`: a separate, non-hardlinked clone of `clean/` on the run branch,
  without a remote; this is what the sandbox mounts. When the repository's mirror
  keeps a tree (`Mirrors.keep_tree`, made by the last run), the run takes it instead
  and brings it to the base: only the files that differ are written. Whatever the agent plants
  in its `.git` (hooks, config, fsmonitor) is never read by the host: the
  sandbox exports the changes as a binary patch (see `agentd.handback.op_export`).
  With `background=True` (the pipeline) its checkout runs on a thread while the run
  reads decode.yml from `clean/` and starts its sandbox: `Workspace.ready()` waits for
  it, and nothing may touch `workspace/` before (`SandboxSpec.ready`).

A token, when given, reaches git only as an `http.extraHeader` in the
environment of the one command that needs it (`git_env`), never in a URL, an
argument or a `.git/config`.
"""

from __future__ import annotations

import base64
import functools
import logging
import os
import re
import shutil
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from bot.core.errors import ConfigError, DecodeError
from bot.core.redact import Redactor
from bot.core.trees import remove_tree
from bot.workspace import git_retry, submodules
from bot.workspace.mirror import Mirrors
from bot.workspace.patch_check import check_patch, sections

log = logging.getLogger(__name__)
BOT_IDENTITY = ("decode-bot", "decode-bot@users.noreply.github.com")
_PASS_THROUGH = ("PATH", "HOME", "TMPDIR", "SSH_AUTH_SOCK", "GIT_SSH_COMMAND", "SSL_CERT_FILE", "SSL_CERT_DIR",
                 "GIT_SSL_CAINFO", "http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")
URL_SCHEMES = ("https", "http", "ssh", "git+ssh", "ssh+git", "git", "file")  # git's own transports
_HARDENING = {
    "core.hooksPath": os.devnull,
    "core.fsmonitor": "false",
    "core.protectNTFS": "true",
    "core.protectHFS": "true",
    "credential.helper": "",
    "commit.gpgSign": "false",
    "gc.auto": "0",
    "maintenance.auto": "false",
    "advice.detachedHead": "false",
    "init.defaultBranch": "main",
}


class Applied(NamedTuple):
    """What `Workspace.apply_patch` staged, and what it left out of the commit (path -> why)."""

    changed: list[str]
    left_out: dict[str, str]


def git_env(token: str | None = None, *, local: bool = False, base: Mapping[str, str] | None = None,
            token_scope: str | None = None) -> dict[str, str]:
    """The environment for one git command: no prompts, no global or system config, no hooks.

    With `token`, an `Authorization: Basic base64("x-access-token:" + token)`
    header is added through `GIT_CONFIG_KEY_n`/`GIT_CONFIG_VALUE_n` (GitHub's
    documented form for installation and Actions tokens); with `token_scope`
    (a URL prefix such as `https://github.com/`) it is sent to that prefix only,
    as for submodules, whose URLs the repository chooses. `local` allows the
    file protocol, for cloning a path.
    """
    source = os.environ if base is None else base
    env = {k: source[k] for k in _PASS_THROUGH if k in source}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update(LANG="C", LC_ALL="C", GIT_TERMINAL_PROMPT="0", GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    config = dict(_HARDENING)
    if local:
        config["protocol.file.allow"] = "always"
    if token:
        basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
        config[f"http.{token_scope}.extraHeader" if token_scope else "http.extraHeader"] = f"Authorization: Basic {basic}"
    for i, (key, value) in enumerate(config.items()):
        env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = key, value
    env["GIT_CONFIG_COUNT"] = str(len(config))
    return env


def require_git() -> None:
    """A ConfigError unless git is on PATH: every door clones, commits and pushes with it (else the first clone
    failed as "git: No such file or directory", named as a data dir to fix, or with a traceback)."""
    if shutil.which("git") is None:
        raise ConfigError("git is not on PATH: install git (decode clones, commits and pushes with it)")


def _git(args: Sequence[str], cwd: Path, env: Mapping[str, str], redactor: Redactor, *,
         what: str, input: bytes | None = None, ok: tuple[int, ...] = (0,), timeout: float = 600) -> bytes:
    """Run git; a failure is a `DecodeError` saying `what` failed, with git's stderr redacted. A command that
    talks to a remote and fails in a way that may pass (a 5xx, a broken connection: `git_retry.retryable`) is
    tried again, `git_retry.ATTEMPTS` times in all, and logged."""
    for attempt in range(1, git_retry.ATTEMPTS):
        try:
            return _git_once(args, cwd, env, redactor, what=what, input=input, ok=ok, timeout=timeout)
        except DecodeError as e:
            if not git_retry.retryable(args, e.stderr or ""):
                raise
            log.warning("%s failed (%s): trying again (%d of %d)", what, str(e).removeprefix(f"{what} failed: "),
                        attempt + 1, git_retry.ATTEMPTS)
            time.sleep(attempt)
    return _git_once(args, cwd, env, redactor, what=what, input=input, ok=ok, timeout=timeout)


def _git_once(args: Sequence[str], cwd: Path, env: Mapping[str, str], redactor: Redactor, *,
              what: str, input: bytes | None, ok: tuple[int, ...], timeout: float) -> bytes:
    try:
        res = subprocess.run(["git", *args], cwd=cwd, env=dict(env), input=input, capture_output=True,
                             timeout=timeout, stdin=None if input is not None else subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise DecodeError(f"{what} took longer than {timeout:.0f}s") from None
    if res.returncode not in ok:
        stderr = redactor.redact(res.stderr.decode("utf-8", "replace").strip())
        # git's own reason is its first `fatal:`/`error:` line; the lines after it are advice ("...and the
        # repository exists.")
        lines = stderr.splitlines()
        detail = next((x for x in lines if x.startswith(("fatal:", "error:"))), lines[-1] if lines else
                      f"exit status {res.returncode}")
        raise DecodeError(f"{what} failed: {detail}", exit_code=res.returncode, stderr=stderr)
    return res.stdout


@dataclass
class Workspace:
    """A prepared run: `clean` (host-only clone) and `path` (the sandbox's copy) on `branch` at `base_sha`."""

    clean: Path
    path: Path
    remote: str
    branch: str
    base: str
    base_sha: str
    redactor: Redactor
    identity: tuple[str, str] = BOT_IDENTITY
    notes: list[str] = field(default_factory=list)  # what `prepare` could not do (a submodule it could not fetch)
    checkout: Future[None] | None = None  # the copy's checkout while `prepare(background=True)` left it running
    mirrors: Mirrors | None = None  # where `remote`'s mirror is, when the run was cloned from one

    def ready(self) -> None:
        """Wait until the sandbox's copy is checked out; raises the checkout's `DecodeError`."""
        if self.checkout is not None:
            self.checkout.result()

    def keep_tree(self) -> bool:
        """Leave a checkout of the remote's default branch beside its mirror for the next run to take
        (`Mirrors.keep_tree`); whether one was made. A failure is logged, never raised: a run does not
        fail for the sake of the next."""
        if self.mirrors is None:
            return False
        try:
            return self.mirrors.keep_tree(self.remote, functools.partial(_git, env=git_env(local=True),
                                                                         redactor=self.redactor))
        except (DecodeError, OSError) as e:
            log.warning("keeping a checkout for the next run of %s failed: %s", self.redactor.redact(self.remote), e)
            return False

    def git(self, *args: str, what: str = "git", input: bytes | None = None,
            extra_env: Mapping[str, str] | None = None, ok: tuple[int, ...] = (0,)) -> bytes:
        """Run git in the clean clone with the hardened environment."""
        env = {**git_env(), **(extra_env or {})}
        return _git(args, self.clean, env, self.redactor, what=what, input=input, ok=ok)

    def branch_commit(self, branch: str) -> str:
        """The commit of the remote's `branch` as cloned (the base a pull request merges into)."""
        out = self.git("rev-parse", "--verify", "--quiet", f"refs/remotes/origin/{branch}^{{commit}}",
                       what=f"resolving {branch}", ok=(0, 1)).decode().strip()
        if not out:
            raise DecodeError(f"the branch {branch!r} does not exist in {self.redactor.redact(self.remote)}")
        return out

    def apply_patch(self, patch: bytes, *, keep_workflows: bool = False, max_file_bytes: int | None = None) -> Applied:
        """Stage `patch` in the clean clone, without the entries `patch_check.check_patch` leaves out.

        Changes to workflow files (`is_workflow_path`) are left out unless
        `keep_workflows`: a pushed workflow runs with the repository's secrets,
        so only the base branch's decode.yml can allow them.
        """
        paths, left_out = check_patch(self.git, self.redactor, patch, max_file_bytes=max_file_bytes,
                                      keep_workflows=keep_workflows)
        if paths:
            kept = b"".join(body for names, body in sections(patch) if not any(n in left_out for n in names))
            self.git("apply", "--cached", "--binary", "--whitespace=nowarn", "-", what="applying the agent's patch",
                     input=kept)
        return Applied(paths, left_out)

    def commit(self, message: str, co_author: str | None = None) -> str | None:
        """Commit the applied changes as the bot, crediting `co_author` ("Name <email>"); the sha, or None."""
        args = ["commit", "--quiet", "--no-verify", "--no-gpg-sign", "--cleanup=whitespace", "-F", "-"]
        if co_author:
            if not re.fullmatch(r"[^<>\n\r]+ <[^<>\s]+>", co_author.strip()):
                raise DecodeError(f"co-author {co_author!r} is not valid: give it as 'Name <email>'")
            args += ["--trailer", f"Co-authored-by: {co_author.strip()}"]
        if not self.git("diff", "--cached", "--name-only", what="checking for changes").strip():
            return None
        name, email = self.identity
        who = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_COMMITTER_NAME": name,
               "GIT_COMMITTER_EMAIL": email}
        text = self.redactor.redact(message).strip() or "Changes by decode-bot"
        self.git(*args, what="committing the agent's changes", input=text.encode(), extra_env=who)
        return self.git("rev-parse", "HEAD", what="reading the new commit").decode().strip()


    def push(self, token: str | None, *, force: bool = False, remote: str | None = None) -> None:
        """Push the run branch to `remote` (default: the one it was cloned from), authenticated by `token`
        for this command only."""
        remote = remote or self.remote
        local = not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", remote) or remote.startswith("file://")
        args = ["push", "--quiet", *(["--force"] if force else []), "--", remote,
                f"HEAD:refs/heads/{self.branch}"]
        try:
            self.git(*args, what=f"pushing {self.branch}", extra_env=git_env(token, local=local))
        except DecodeError as e:
            refusal = next((line for line in (e.stderr or "").splitlines() if "workflow" in line.lower()), None)
            if refusal is None:
                raise
            refusal = refusal.removeprefix("remote:").strip()
            raise DecodeError(f"pushing {self.branch} failed: GitHub said: {refusal}. The token needs the right to "
                              "write workflows: give the GitHub App the 'Workflows: write' permission (or a personal "
                              "token the workflow scope), or remove allow_workflow_changes from .github/decode.yml",
                              exit_code=e.exit_code, stderr=e.stderr) from None


def git_url(repo: str) -> bool:
    """Whether `repo` is a git URL (`scheme://...` or scp-like `user@host:path`) rather than a local path."""
    return bool(re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", repo) or re.match(r"^[\w.-]+@[\w.-]+:", repo))


def url_problem(repo: str) -> str | None:
    """What is wrong with git URL `repo` before any clone is tried, said with the fix: a scheme git has no
    transport for here, or a `file://` path that does not exist; None when it may be cloned."""
    scheme = repo.split("://", 1)[0].lower() if "://" in repo else ""
    if scheme and scheme not in URL_SCHEMES:
        return f"git cannot clone over {scheme}://: give an https://, ssh:// or file:// URL, or owner/name"
    if scheme == "file" and not Path(where := urllib.parse.unquote(urllib.parse.urlsplit(repo).path)).exists():
        return f"{where} does not exist: give the path of a repository on this machine"
    return None


def prepare(repo: str, run_dir: Path, branch: str, base: str | None = None, token: str | None = None, *,
            redactor: Redactor | None = None, mirrors: Mirrors | None = None, background: bool = False,
            say: Callable[[str], object] = lambda line: None) -> Workspace:
    """Clone `repo` (URL or local path) into `run_dir/clean` (index only) and `run_dir/workspace` (the one
    checkout), on `branch` from `base`.

    `base` is a branch, tag or commit of the remote, or a `refs/pull/N/head`
    ref; by default its default branch. `token` authenticates the clone over HTTPS (see `git_env`). With
    `mirrors`, a URL is fetched into its mirror and cloned from there (`bot.workspace.mirror`); a local
    path is always cloned directly. Submodules are checked out in both clones where the host can fetch them
    (`bot.workspace.submodules`); one it cannot is left empty and named in `Workspace.notes`. With
    `background`, a base without submodules is checked out on a thread: call `Workspace.ready()` before
    anything reads or deletes the copy. `say` hears, once the copy is checked out (from that thread), whether
    it is a tree an earlier run kept, or why that tree could not be used.
    """
    redactor = redactor or Redactor([token])
    repo, local = _source(repo)
    for label, value in (("branch", branch), ("base", base or "x")):
        if value.startswith("-") or not value.strip() or any(c.isspace() or c in "~^:?*[\\" for c in value):
            raise DecodeError(f"{label} {value!r} is not a valid git ref name")
    run_dir = Path(run_dir)
    clean, copy = run_dir / "clean", run_dir / "workspace"
    for target in (clean, copy):
        if target.exists():
            raise DecodeError(f"{target} already exists: use a new run directory")
    run_dir.mkdir(parents=True, exist_ok=True)
    remote_env = git_env(token, local=local)
    mirrors = None if local else mirrors
    taken = _clone_clean(repo, clean, remote_env, redactor, mirrors, take_tree=copy)
    env = git_env()
    base, base_sha = _resolve_base(repo, clean, base, remote_env, redactor)
    _git(["update-ref", f"refs/heads/{branch}", base_sha], clean, env, redactor, what=f"creating branch {branch}")
    _git(["symbolic-ref", "HEAD", f"refs/heads/{branch}"], clean, env, redactor, what=f"creating branch {branch}")
    _git(["read-tree", base_sha], clean, env, redactor, what="reading the base into the index")
    run = functools.partial(_git, redactor=redactor)
    has_submodules = bool(submodules.gitlinks(clean, env, run))
    if has_submodules and taken:  # a kept tree is of the default branch; this base has submodules to copy in
        shutil.rmtree(copy)
        taken = False
    check_out = functools.partial(_check_out, clean, copy, branch, base_sha, redactor, taken=taken, say=say)
    checkout = _on_thread(check_out) if background and not has_submodules else None
    if checkout is None:
        check_out()
    parts = urllib.parse.urlsplit(repo)
    scope = f"{parts.scheme}://{parts.netloc}/" if parts.scheme in ("http", "https") else None
    notes: list[str] = []
    if has_submodules:
        _git(["checkout-index", "--force", "--", ".gitmodules"], clean, env, redactor, what="reading .gitmodules",
             ok=(0, 1))
        notes = submodules.check_out(clean, git_env(token if scope else None, local=local, token_scope=scope), run)
        notes += submodules.copy(clean, copy, git_env(local=True), run)
    return Workspace(clean=clean, path=copy, remote=repo, branch=branch, base=base, base_sha=base_sha,
                     redactor=redactor, notes=notes, checkout=checkout, mirrors=mirrors)


def _check_out(clean: Path, copy: Path, branch: str, base_sha: str, redactor: Redactor, *, taken: bool,
               say: Callable[[str], object]) -> None:
    """The sandbox's copy of `clean` on `branch` at `base_sha`: a mirror's kept tree (`taken`, already at
    `copy`) brought to the base, or else a fresh copy checked out.

    The fresh copy has the clean clone's object files copied (never hardlinked, no alternates), so nothing
    the sandbox writes reaches the clean clone; about 7x faster than a pack-protocol clone (bench/prepare.py).
    Both end with the same refs: the run branch, and the clean clone's tags. A kept tree that cannot be
    brought to the base is deleted and the copy made afresh. `say` hears which it was, when a tree was kept."""
    env, local = git_env(), git_env(local=True)
    workers = ["-c", "checkout.workers=0"]  # one per core: 8,000 small files in a fifth of the time here
    if taken:
        try:
            _git(["fetch", "--quiet", "--no-tags", "--prune", "--", str(clean),
                  f"+refs/heads/{branch}:refs/heads/{branch}", "+refs/tags/*:refs/tags/*"],
                 copy, local, redactor, what="bringing the kept tree to the base")
            _git([*workers, "checkout", "--quiet", "--force", branch], copy, env, redactor,
                 what="checking out the workspace")
            say("the workspace is the checkout an earlier run kept beside the mirror, brought to the base: only "
                "the files that differ were written")
            return
        except DecodeError as e:
            remove_tree(copy)
            log.warning("the kept checkout could not be brought to the base, copying afresh: %s", e)
            say(f"the checkout an earlier run kept beside the mirror could not be brought to the base ({e}); the "
                "workspace was copied afresh from the clean clone instead")
    _git(["clone", "--quiet", "--template=", "--local", "--no-hardlinks", "--no-checkout", "--", str(clean), str(copy)],
         copy.parent, local, redactor, what="copying the workspace")
    _git(["remote", "remove", "origin"], copy, env, redactor, what="detaching the workspace")
    _git([*workers, "checkout", "--quiet", "-B", branch, base_sha], copy, env, redactor,
         what="checking out the workspace")


def _on_thread(step: Callable[[], object]) -> Future[None]:
    """`step` run on a thread of its own; the future holds its error."""
    done: Future[None] = Future()

    def run() -> None:
        try:
            step()
            done.set_result(None)
        except BaseException as e:  # noqa: BLE001 - handed to whoever waits on `done`
            done.set_exception(e)

    threading.Thread(target=run, name="decode-checkout", daemon=True).start()
    return done


def _source(repo: str) -> tuple[str, bool]:
    """`repo` as git is given it (a local path resolved) and whether it is local; bad input is a `DecodeError`."""
    if not git_url(repo):
        source = Path(repo).expanduser()
        if not source.exists():
            raise ConfigError(f"the repository path {repo} does not exist: give a git URL or an existing clone")
        return str(source.resolve()), True
    if urllib.parse.urlsplit(repo).password:
        raise ConfigError("the repository URL contains credentials: remove them and set GITHUB_TOKEN instead")
    return repo, repo.startswith("file://")


def _clone_clean(repo: str, clean: Path, remote_env: Mapping[str, str], redactor: Redactor,
                 mirrors: Mirrors | None, *, take_tree: Path) -> bool:
    """The clean clone, without a working tree: from `repo`'s mirror when there is one (its `origin` then
    set back to `repo`, for pushes and pull request refs), else from `repo` itself. Whether the mirror's
    kept tree was moved to `take_tree`."""
    what = f"cloning {redactor.redact(repo)}"
    args = ["clone", "--quiet", "--template=", "--no-checkout"]
    if mirrors is None:
        _git([*args, "--no-local", "--", repo, str(clean)], clean.parent, remote_env, redactor, what=what)
        return False
    run = functools.partial(_git, env=remote_env, redactor=redactor)
    with mirrors.updated(repo, run, take_tree=take_tree) as (mirror, taken):
        _git([*args, "--local", "--", str(mirror), str(clean)], clean.parent, git_env(local=True), redactor,
             what=what)
    _git(["remote", "set-url", "origin", repo], clean, git_env(), redactor, what="pointing origin at the remote")
    return taken


def _resolve_base(repo: str, clean: Path, base: str | None, remote_env: Mapping[str, str],
                  redactor: Redactor) -> tuple[str, str]:
    """`base` (the remote's default branch when None) and its commit in `clean`; a ConfigError (input to fix)
    when the remote has no such ref."""
    env = git_env()
    if base is None:
        head = _git(["symbolic-ref", "--quiet", "--short", "HEAD"], clean, env, redactor, what="reading HEAD")
        base = head.decode().strip()
    candidates: tuple[str, ...] = (f"refs/remotes/origin/{base}", f"refs/tags/{base}", base)
    if base.startswith("refs/pull/"):  # a pull request's head, fork PRs included; not fetched by a clone
        _git(["fetch", "--quiet", "origin", base], clean, remote_env, redactor, what=f"fetching {base}")
        candidates = ("FETCH_HEAD",)
    for candidate in candidates:
        out = _git(["rev-parse", "--verify", "--quiet", f"{candidate}^{{commit}}"], clean, env, redactor,
                   what="resolving the base", ok=(0, 1))
        if out.strip():
            return base, out.decode().strip()
    raise ConfigError(f"base {base!r} is neither a branch, a tag nor a commit of {redactor.redact(repo)} (or the "
                      "repository is empty): give one of its branches, tags or commits")  # bad input: exit 2
