"""The host side of a run's repository: a clean clone the sandbox never sees, and its copy that it does.

`prepare` clones the repository twice under the run directory:

- `clean/`: the host's clone. Only the host runs git here, with hooks,
  fsmonitor and every global or system config disabled. The agent's work lands
  here as a validated patch (`Workspace.apply_patch`) and is committed by the bot;
  an entry the host will not carry (an outward symlink, a `.git` path, a file over
  DECODE_MAX_FILE_MB, a change to a Git LFS file...) is left out, named with its
  reason, and the rest kept. Submodules are checked out here and copied from here
  (`bot.workspace.submodules`); changes inside them are never carried (agentd's Stage).
- `workspace/`: a separate, non-hardlinked clone of `clean/` on the run branch,
  without a remote; this is what the sandbox mounts. Whatever the agent plants
  in its `.git` (hooks, config, fsmonitor) is never read by the host: the
  sandbox exports the changes as a binary patch (see `agentd.op_export`).

A token, when given, reaches git only as an `http.extraHeader` in the
environment of the one command that needs it (`git_env`), never in a URL, an
argument or a `.git/config`.
"""

from __future__ import annotations

import base64
import functools
import os
import re
import subprocess
import tempfile
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from bot.workspace import submodules
from bot.core.errors import DecodeError
from bot.core.redact import Redactor

BOT_IDENTITY = ("decode-bot", "decode-bot@users.noreply.github.com")
_PASS_THROUGH = ("PATH", "HOME", "TMPDIR", "SSH_AUTH_SOCK", "GIT_SSH_COMMAND", "SSL_CERT_FILE", "SSL_CERT_DIR",
                 "GIT_SSL_CAINFO", "http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")
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
_ALLOWED_MODES = {"100644", "100755", "120000", "000000"}
_LINK_HOPS = 40
MB = 1024 * 1024
LFS_POINTER_MAX = 1024  # the Git LFS spec caps a pointer file at 1024 bytes
LFS_VERSIONS = (b"version https://git-lfs.github.com/spec/v1\n", b"version https://hawser.github.com/spec/v1\n")
LFS_REASON = "tracked by Git LFS: decode-bot does not carry LFS content; change it by hand"  # as in agentd
LFS_NEW_REASON = ("matches a Git LFS pattern in .gitattributes: decode-bot does not carry LFS content; "
                  "add it by hand")
WORKFLOW_REASON = "a workflow file, which would run with the repository's secrets (allow_workflow_changes)"


class Applied(NamedTuple):
    """What `Workspace.apply_patch` staged, and what it left out of the commit (path -> why)."""

    changed: list[str]
    left_out: dict[str, str]


class PatchRefused(DecodeError):
    """The agent's changes include something the bot will not commit; the message says what."""


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


def _git(args: Sequence[str], cwd: Path, env: Mapping[str, str], redactor: Redactor, *,
         what: str, input: bytes | None = None, ok: tuple[int, ...] = (0,), timeout: float = 600) -> bytes:
    """Run git; a failure is a `DecodeError` saying `what` failed, with git's stderr redacted."""
    try:
        res = subprocess.run(["git", *args], cwd=cwd, env=dict(env), input=input, capture_output=True,
                             timeout=timeout, stdin=None if input is not None else subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise DecodeError(f"{what} took longer than {timeout:.0f}s") from None
    if res.returncode not in ok:
        stderr = redactor.redact(res.stderr.decode("utf-8", "replace").strip())
        detail = stderr.splitlines()[-1] if stderr else f"exit status {res.returncode}"
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

    def check_patch(self, patch: bytes, *, max_file_bytes: int | None = None,
                    keep_workflows: bool = True) -> tuple[list[str], dict[str, str]]:
        """The paths `patch` changes in the result, and the entries to leave out of it (path -> why).

        The patch is dry-run into a scratch index, so the check sees exactly what
        git would apply, and then every entry of the resulting tree is judged.
        Left out: a path with a `.git` component (any case, NTFS/HFS aliases
        included), an absolute path or `..`, a nested repository (gitlink), an
        unsupported mode, a file over `max_file_bytes`, a symlink that leaves the
        tree or enters `.git` once resolved against it (`link_problem`), and,
        unless `keep_workflows`, workflow files. Whole-patch refusals
        (`PatchRefused`): a configured secret anywhere in the changes (whatever
        carried it out of the environment, none of that work is trusted), and a
        patch that does not apply or whose file sections cannot be told apart.
        Left-out sections are removed and the rest is checked again, until
        nothing more is found.
        """
        if not patch.strip():
            return [], {}
        if self.redactor.contains_secret(patch):
            raise PatchRefused("refused: the changes contain a configured secret (a token or key); remove it")
        sections = _sections(patch)
        left_out: dict[str, str] = {}
        for names, _ in sections:
            for name in names:
                if (why := path_problem(name)) is not None:
                    left_out.setdefault(name, why)
        while True:
            kept = b"".join(body for names, body in sections if not any(n in left_out for n in names))
            paths, found = self._judge(kept, max_file_bytes, keep_workflows)
            if not found:
                return [p for p in paths if p not in left_out], left_out
            named = {n for names, body in sections for n in names}
            if unmatched := sorted(set(found) - named):
                raise PatchRefused(f"refused: {unmatched[0]} ({found[unmatched[0]]}) is changed by a part of the "
                                   "patch that does not name it; the patch cannot be split")
            left_out.update(found)

    def _judge(self, patch: bytes, max_file_bytes: int | None, keep_workflows: bool) -> tuple[list[str], dict[str, str]]:
        """Apply `patch` to a scratch index; the paths it changes and those to leave out of them."""
        if not patch.strip():
            return [], {}
        with tempfile.TemporaryDirectory(prefix="decode-check-") as tmp:
            index = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            self.git("read-tree", "HEAD", what="reading the base tree", extra_env=index)
            try:
                self.git("apply", "--cached", "--binary", "--whitespace=nowarn", "-", what="applying the agent's patch",
                         input=patch, extra_env=index)
            except DecodeError as e:
                raise PatchRefused(f"refused: the patch does not apply cleanly: {e.stderr or e}",
                                   exit_code=e.exit_code, stderr=e.stderr) from None
            raw = self.git("diff-index", "--cached", "--raw", "-z", "--no-renames", "--no-abbrev", "HEAD",
                           what="listing the patch", extra_env=index)
            tree = self.git("ls-files", "--stage", "-z", what="listing the resulting tree", extra_env=index)
            added = [name for meta, name in zip(raw.split(b"\0")[0::2], raw.split(b"\0")[1::2])
                     if meta.endswith(b" A")]
            attrs = self.git("check-attr", "--cached", "-z", "--stdin", "filter", what="reading .gitattributes",
                             input=b"".join(name + b"\0" for name in added), extra_env=index) if added else b""
        entries = [(meta.decode().lstrip(":").split(" "), os.fsdecode(name))
                   for meta, name in zip(raw.split(b"\0")[0::2], raw.split(b"\0")[1::2])]
        link_shas = {}
        for record in filter(None, tree.split(b"\0")):
            meta, _, name = record.partition(b"\t")
            mode, sha, _ = meta.decode().split(" ")
            if mode == "120000":
                link_shas[os.fsdecode(name)] = sha
        said = attrs.split(b"\0")  # path, attribute, value, ...
        new_lfs = {os.fsdecode(said[i]) for i in range(0, len(said) - 2, 3) if said[i + 2] == b"lfs"}
        regular = ("100644", "100755")
        olds = [old_sha for (old_mode, _, old_sha, _, _), _ in entries if old_mode in regular]
        sizes = self._sizes([new_sha for (_, new_mode, _, new_sha, _), _ in entries if new_mode in regular] + olds)
        small = sorted({sha for sha in olds if sizes[sha] <= LFS_POINTER_MAX})
        pointers = {sha for sha, data in self._contents(small).items() if data.startswith(LFS_VERSIONS)}
        targets = self._contents(sorted(set(link_shas.values())))
        links = {path: os.fsdecode(targets[sha]) for path, sha in link_shas.items()}
        paths, found = [], {}
        for (_, new_mode, old_sha, new_sha, _), path in entries:
            paths.append(path)
            why = path_problem(path)
            if why is None and old_sha in pointers:
                why = LFS_REASON
            elif why is None and path in new_lfs:
                why = LFS_NEW_REASON
            if why is None and new_mode == "160000":
                why = "a nested git repository (a gitlink); remove its .git directory or leave it out"
            elif why is None and new_mode not in _ALLOWED_MODES:
                why = f"unsupported file mode {new_mode}"
            elif why is None and new_mode == "120000":
                why = link_problem(path, links)
            elif why is None and max_file_bytes is not None and sizes.get(new_sha, 0) > max_file_bytes:
                why = (f"{sizes[new_sha] / MB:.0f} MB, over the {max_file_bytes / MB:.0f} MB limit for one file "
                       "(DECODE_MAX_FILE_MB)")
            if why is None and not keep_workflows and is_workflow_path(path):
                why = WORKFLOW_REASON
            if why is not None:
                found[path] = why
        return sorted(paths), found

    def _sizes(self, shas: list[str]) -> dict[str, int]:
        """The size of each object in `shas`, without reading them."""
        if not shas:
            return {}
        out = self.git("cat-file", "--batch-check", what="sizing the changed files",
                       input="".join(f"{sha}\n" for sha in shas).encode())
        return {sha: int(size) for sha, _, size in (line.split(" ") for line in out.decode().splitlines())}

    def _contents(self, shas: list[str]) -> dict[str, bytes]:
        """The content of each blob in `shas` (small ones: symlink targets, Git LFS pointers)."""
        if not shas:
            return {}
        out, found, at = self.git("cat-file", "--batch", what="reading small files",
                                  input="".join(f"{sha}\n" for sha in shas).encode()), {}, 0
        for sha in shas:
            end = out.index(b"\n", at)
            size = int(out[at:end].split(b" ")[2])
            found[sha], at = out[end + 1 : end + 1 + size], end + 2 + size
        return found

    def apply_patch(self, patch: bytes, *, keep_workflows: bool = False, max_file_bytes: int | None = None) -> Applied:
        """Stage `patch` in the clean clone, without the entries `check_patch` leaves out.

        Changes to workflow files (`is_workflow_path`) are left out unless
        `keep_workflows`: a pushed workflow runs with the repository's secrets,
        so only the base branch's decode.yml can allow them.
        """
        paths, left_out = self.check_patch(patch, max_file_bytes=max_file_bytes, keep_workflows=keep_workflows)
        if paths:
            kept = b"".join(body for names, body in _sections(patch) if not any(n in left_out for n in names))
            self.git("apply", "--index", "--binary", "--whitespace=nowarn", "-", what="applying the agent's patch",
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


def prepare(repo: str, run_dir: Path, branch: str, base: str | None = None, token: str | None = None, *,
            redactor: Redactor | None = None) -> Workspace:
    """Clone `repo` (URL or local path) into `run_dir/clean` and `run_dir/workspace`, on `branch` from `base`.

    `base` is a branch, tag or commit of the remote, or a `refs/pull/N/head`
    ref; by default its default branch. `token` authenticates the clone over HTTPS (see `git_env`).
    Submodules are checked out in both clones where the host can fetch them
    (`bot.workspace.submodules`); one it cannot is left empty and named in `Workspace.notes`.
    """
    redactor = redactor or Redactor([token])
    local = not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", repo) and not re.match(r"^[\w.-]+@[\w.-]+:", repo)
    if local:
        source = Path(repo).expanduser()
        if not source.exists():
            raise DecodeError(f"the repository path {repo} does not exist: give a git URL or an existing clone")
        repo = str(source.resolve())
    elif urllib.parse.urlsplit(repo).password:
        raise DecodeError("the repository URL contains credentials: remove them and set GITHUB_TOKEN instead")
    local = local or repo.startswith("file://")
    for label, value in (("branch", branch), ("base", base or "x")):
        if value.startswith("-") or not value.strip() or any(c.isspace() or c in "~^:?*[\\" for c in value):
            raise DecodeError(f"{label} {value!r} is not a valid git ref name")
    run_dir = Path(run_dir)
    clean, copy = run_dir / "clean", run_dir / "workspace"
    for target in (clean, copy):
        if target.exists():
            raise DecodeError(f"{target} already exists: use a new run directory")
    run_dir.mkdir(parents=True, exist_ok=True)
    _git(["clone", "--quiet", "--template=", *(["--no-local"] if local else []), "--", repo, str(clean)], run_dir,
         git_env(token, local=local), redactor, what=f"cloning {redactor.redact(repo)}")
    env = git_env()
    if base is None:
        head = _git(["symbolic-ref", "--quiet", "--short", "HEAD"], clean, env, redactor, what="reading HEAD")
        base = head.decode().strip()
    candidates: tuple[str, ...] = (f"refs/remotes/origin/{base}", f"refs/tags/{base}", base)
    if base.startswith("refs/pull/"):  # a pull request's head, fork PRs included; not fetched by a clone
        _git(["fetch", "--quiet", "origin", base], clean, git_env(token, local=local), redactor,
             what=f"fetching {base}")
        candidates = ("FETCH_HEAD",)
    base_sha = ""
    for candidate in candidates:
        out = _git(["rev-parse", "--verify", "--quiet", f"{candidate}^{{commit}}"], clean, env, redactor,
                   what="resolving the base", ok=(0, 1))
        if out.strip():
            base_sha = out.decode().strip()
            break
    if not base_sha:
        raise DecodeError(f"base {base!r} is neither a branch, a tag nor a commit of {redactor.redact(repo)}"
                          " (or the repository is empty)")
    _git(["checkout", "--quiet", "-B", branch, base_sha], clean, env, redactor, what=f"creating branch {branch}")
    # The sandbox's copy: the clean clone's object files copied (never hardlinked, no alternates), so nothing
    # the sandbox writes reaches the clean clone; about 7x faster than a pack-protocol clone (bench/prepare.py).
    _git(["clone", "--quiet", "--template=", "--local", "--no-hardlinks", "--no-checkout", "--", str(clean), str(copy)],
         run_dir, git_env(local=True), redactor, what="copying the workspace")
    _git(["checkout", "--quiet", "-B", branch, base_sha], copy, env, redactor, what="checking out the workspace")
    _git(["remote", "remove", "origin"], copy, env, redactor, what="detaching the workspace")
    parts = urllib.parse.urlsplit(repo)
    scope = f"{parts.scheme}://{parts.netloc}/" if parts.scheme in ("http", "https") else None
    run = functools.partial(_git, redactor=redactor)
    notes = submodules.check_out(clean, git_env(token if scope else None, local=local, token_scope=scope), run)
    notes += submodules.copy(clean, copy, git_env(local=True), run)
    return Workspace(clean=clean, path=copy, remote=repo, branch=branch, base=base, base_sha=base_sha,
                     redactor=redactor, notes=notes)


def is_workflow_path(path: str) -> bool:
    """Whether committing `path` could add or change a GitHub Actions workflow (any case, or via a link)."""
    lowered = path.lower()
    return lowered in (".github", ".github/workflows") or lowered.startswith(".github/workflows/")


def _sections(patch: bytes) -> list[tuple[list[str], bytes]]:
    """The patch cut before each `diff --git` line: the paths each part names, and its bytes.

    Anything before the first such line is dropped. Hunk lines start with a space,
    `+`, `-` or `\\`, and binary data has no space, so the cut never falls inside a file.
    """
    starts = [m.start() for m in re.finditer(rb"^diff --git ", patch, re.M)]
    if patch.strip() and not starts:
        raise PatchRefused("refused: the changes are not a git patch (no 'diff --git' line)")
    return [(_header_paths(patch[a:b]), patch[a:b]) for a, b in zip(starts, [*starts[1:], len(patch)])]


def _header_paths(patch: bytes) -> list[str]:
    """Every path named in the patch's file headers (hunk bodies skipped), for an early, clear refusal."""
    paths, in_header = [], False
    for raw in patch.split(b"\n"):
        line = raw.decode("utf-8", "surrogateescape").rstrip("\r")
        if line.startswith("diff --git "):
            in_header = True
            rest = line[len("diff --git ") :]
            paths += [_strip_side(_unquote(name)) for name in re.findall(r'"(?:[^"\\]|\\.)*"|\S+', rest)]
            n = (len(rest) - 5) // 2  # "a/NAME b/NAME": a name with spaces, as git itself reads it
            if rest.startswith("a/") and len(rest) == 2 * n + 5 and rest[2 : 2 + n] == rest[n + 5 :]:
                paths.append(rest[2 : 2 + n])
        elif line.startswith(("@@", "GIT binary patch")):
            in_header = False
        elif in_header:
            for prefix in ("--- ", "+++ ", "rename from ", "rename to ", "copy from ", "copy to "):
                if line.startswith(prefix):
                    name = _unquote(line[len(prefix) :].rstrip("\t"))
                    if name != "/dev/null":
                        paths.append(_strip_side(name) if prefix in ("--- ", "+++ ") else name)
    return paths


def _strip_side(name: str) -> str:
    return name[2:] if name[:2] in ("a/", "b/") else name


def _unquote(name: str) -> str:
    """Git's C-style quoting of unusual path names ("a/t\\303\\244st")."""
    if len(name) < 2 or not (name.startswith('"') and name.endswith('"')):
        return name
    raw = name[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape").encode("latin-1")
    return raw.decode("utf-8", "surrogateescape")


def path_problem(path: str) -> str | None:
    """Why `path` may never be committed, whatever its content, or None. Mirrored in agentd's `path_problem`."""
    if not path or path.startswith("/"):
        return "an absolute or empty path"
    for part in path.split("/"):
        if part == "..":
            return "leaves the repository through '..'"
        if part.lower().rstrip(" .") in (".git", "git~1"):
            return "inside .git; git's own files are never committed"
    return None


def link_problem(path: str, links: Mapping[str, str]) -> str | None:
    """Why the symlink at `path` would not stay inside the tree, or None.

    `links` maps every symlink of the resulting tree to its target. The target is
    resolved against that tree, following links on the way (chains such as
    `sub/up -> ..` then `x -> sub/up/sub/up/../../../etc/passwd`, directories
    that are links, any letter case, as a case-insensitive checkout would); a
    name the tree lacks counts as a plain directory. A link whose resolution
    steps above the root, is absolute, enters `.git` or loops is refused.
    Mirrored in agentd's `link_problem`, which warns the agent; this one decides.
    """
    folded = {p.lower(): t for p, t in links.items()}
    target = links[path]
    at, todo, hops = path.split("/")[:-1], target.split("/"), 0
    if target.startswith("/"):
        return f"a symlink to {target}, an absolute path outside the repository"
    while todo:
        part = todo.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if not at:
                return f"a symlink to {target}, which resolves outside the repository"
            at.pop()
            continue
        if part.lower().rstrip(" .") in (".git", "git~1"):
            return f"a symlink to {target}, which resolves into .git"
        here = "/".join([*at, part]).lower()
        if here in folded:
            hops += 1
            if hops > _LINK_HOPS:
                return f"a symlink to {target}, which loops through other symlinks"
            if folded[here].startswith("/"):
                return f"a symlink to {target}, which resolves outside the repository"
            todo = folded[here].split("/") + todo
            continue
        at.append(part)
    return None
