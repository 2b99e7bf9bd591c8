"""Submodules in the hand-back: their gitlinks never move, and a change inside one is named, not carried.

The hand-back commits to this repository only. Nothing in a submodule's git
dir is run or configured: its HEAD is read as a file, its objects are only
borrowed by a scratch git dir to compare trees.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile

from .paths import GITLINK
from .scratch import run_git, scratch_repo, zip_z

SUBMODULE_REASON = "changes inside the submodule %s are not carried (decode-bot commits to this repository only)"


def submodule_changes(root: str, tracked: dict, keep: set) -> dict:
    """Submodules of the base (gitlinks): added to `keep` (their base entry stays), and path -> why for
    those where anything inside changed."""
    found = {}
    for path, meta in sorted(tracked.items()):
        if meta[0] == GITLINK:
            keep.add(path)
            if submodule_changed(root, path, meta[1]):
                found[path] = SUBMODULE_REASON % path
    return found


def submodule_changed(root: str, path: str, sha: str) -> bool:
    """Whether the submodule at `path` (base commit `sha`) differs from it: files, nested submodules or HEAD.

    An empty directory is a submodule that was never checked out: unchanged.
    """
    full = os.path.join(root, path)
    try:
        st = os.lstat(full)
    except OSError:
        return True
    if not stat.S_ISDIR(st.st_mode):
        return True
    if not os.listdir(full):
        return False
    gitdir = submodule_gitdir(full)
    if gitdir is not None and read_head(gitdir) != sha:
        return True
    objects = [os.path.join(gitdir, "objects")] if gitdir else []
    for dirpath, dirnames, _ in os.walk(os.path.join(root, ".git", "modules")):
        if "objects" in dirnames and os.path.isfile(os.path.join(dirpath, "HEAD")):
            objects.append(os.path.join(dirpath, "objects"))
        dirnames[:] = [d for d in dirnames if d != "objects"]
    tmp = tempfile.mkdtemp(prefix="decode-submodule-")
    try:
        try:
            env = scratch_repo(tmp, objects, full)
        except subprocess.CalledProcessError:
            return True
        return tree_changed(full, sha, env)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def tree_changed(full: str, sha: str, env: dict) -> bool:
    """Whether the files of the checkout at `full` (nested submodules aside, then each in turn) differ
    from commit `sha`'s tree, compared in the scratch git dir of `env`."""
    found = run_git(["rev-parse", "--verify", "--quiet", sha + "^{tree}"], env, full)
    if found.returncode != 0 or run_git(["read-tree", sha], env, full).returncode != 0:
        return True  # files, but not the commit to compare them with
    nested = [(p, meta.split()[1]) for meta, p in zip_z(run_git(["ls-files", "-s", "-z"], env, full).stdout)
              if meta.split()[0] == GITLINK]
    spec = [":(exclude,literal)" + p for p, _ in nested]
    if run_git(["add", "-A", "--", "."] + spec, env, full).returncode != 0:
        return True
    written = run_git(["write-tree"], env, full)
    if written.returncode != 0 or written.stdout.strip() != found.stdout.strip():
        return True
    return any(submodule_changed(full, p, s) for p, s in nested)


def submodule_gitdir(full: str) -> str | None:
    """The git dir of the checked-out submodule at `full` (its `.git` directory, or where its `.git` file points)."""
    dotgit = os.path.join(full, ".git")
    if os.path.isdir(dotgit) and not os.path.islink(dotgit):
        return dotgit
    try:
        with open(dotgit, "rb") as f:
            line = f.read(4096).decode("utf-8", "replace").strip()
    except OSError:
        return None
    if not line.startswith("gitdir: "):
        return None
    return os.path.normpath(os.path.join(full, line[len("gitdir: "):].strip()))


def read_head(gitdir: str) -> str | None:
    """The commit a git dir's HEAD names, read from its files (loose or packed refs), or None."""
    try:
        with open(os.path.join(gitdir, "HEAD"), "rb") as f:
            head = f.read(4096).decode("utf-8", "replace").strip()
        if not head.startswith("ref: "):
            return head
        ref = head[len("ref: "):]
        if not ref.startswith("refs/") or ".." in ref.split("/"):
            return None
        try:
            with open(os.path.join(gitdir, ref), "rb") as f:
                return f.read(4096).decode("utf-8", "replace").strip()
        except OSError:
            with open(os.path.join(gitdir, "packed-refs"), "rb") as f:
                for line in f.read().decode("utf-8", "replace").splitlines():
                    if line.endswith(" " + ref):
                        return line.split(" ")[0]
    except OSError:
        pass
    return None
