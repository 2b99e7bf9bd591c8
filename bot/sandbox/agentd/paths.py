"""The workspace's bounds and the rules for what a hand-back may carry: paths, symlinks, modes, Git LFS.

Standard library only and Python 3.8-safe, like all of agentd: inside the
sandbox these rules tell the agent what its hand-back would leave out
(`handback.Stage`), and the host imports this same module to decide what it
commits (`bot.workspace.patch_check`), so the two sides cannot disagree.
"""

from __future__ import annotations

import os
import re

LINK_HOPS = 40
ALLOWED_MODES = ("100644", "100755", "120000", "000000")  # files, executables, symlinks, deletions
GITLINK = "160000"
SYMLINK = "120000"
LFS_POINTER_MAX = 1024  # the Git LFS spec caps a pointer file at 1024 bytes
LFS_VERSIONS = (b"version https://git-lfs.github.com/spec/v1\n", b"version https://hawser.github.com/spec/v1\n")
LFS_REASON = "tracked by Git LFS: decode-bot does not carry LFS content; change it by hand"
LFS_NEW_REASON = ("matches a Git LFS pattern in .gitattributes: decode-bot does not carry LFS content; "
                  "add it by hand")
GITLINK_REASON = "a nested git repository (a gitlink); remove its .git directory or leave it out"


class Refused(Exception):
    """A request the sandbox will not carry out; the message goes to the model."""


class Workspace:
    """The sandbox's workspace root, which every path of a request must stay inside."""

    def __init__(self, root: str) -> None:
        self.root = os.path.realpath(root)
        self.export_path: str | None = None  # the last export's patch file, until read to the end

    def resolve(self, path: object) -> str:
        """The real path of `path` (relative to the root), refused if outside it."""
        if not isinstance(path, str) or not path:
            raise Refused("a path is required")
        real = os.path.realpath(os.path.join(self.root, path))
        if real != self.root and not real.startswith(self.root + os.sep):
            raise Refused(
                "refused: %r resolves outside the workspace %s; use a path inside it"
                % (path, self.root)
            )
        return real

    def rel(self, real: str) -> str:
        """`real` relative to the root, as answers name paths."""
        return os.path.relpath(real, self.root)


def path_problem(path: str) -> str | None:
    """Why `path` may never be committed, whatever its content, or None."""
    if not path or path.startswith("/"):
        return "an absolute or empty path"
    for part in path.split("/"):
        if part == "..":
            return "leaves the repository through '..'"
        if part.lower().rstrip(" .") in (".git", "git~1"):
            return "inside .git; git's own files are never committed"
    return None


def link_problem(path: str, links: dict[str, str]) -> str | None:
    """Why the symlink at `path` would not stay inside the tree, or None.

    `links` maps every symlink of the resulting tree to its target. The target is
    resolved against that tree, following links on the way (chains such as
    `sub/up -> ..` then `x -> sub/up/sub/up/../../../etc/passwd`, directories
    that are links, any letter case, as a case-insensitive checkout would); a
    name the tree lacks counts as a plain directory. A link whose resolution
    steps above the root, is absolute, enters `.git` or loops is refused.
    """
    folded = dict((p.lower(), t) for p, t in links.items())
    target = links[path]
    at, todo, hops = path.split("/")[:-1], target.split("/"), 0
    if target.startswith("/"):
        return "a symlink to %s, an absolute path outside the repository" % target
    while todo:
        part = todo.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if not at:
                return "a symlink to %s, which resolves outside the repository" % target
            at.pop()
            continue
        if part.lower().rstrip(" .") in (".git", "git~1"):
            return "a symlink to %s, which resolves into .git" % target
        here = "/".join(at + [part]).lower()
        if here in folded:
            hops += 1
            if hops > LINK_HOPS:
                return "a symlink to %s, which loops through other symlinks" % target
            if folded[here].startswith("/"):
                return "a symlink to %s, which resolves outside the repository" % target
            todo = folded[here].split("/") + todo
            continue
        at.append(part)
    return None


def mode_problem(path: str, mode: str, links: dict[str, str]) -> str | None:
    """Why the entry at `path` with git mode `mode` cannot be committed as it is, or None: a nested
    repository (a gitlink), a mode git does not carry, or a symlink that leaves the tree (`link_problem`)."""
    if mode == GITLINK:
        return GITLINK_REASON
    if mode not in ALLOWED_MODES:
        return "unsupported file mode %s" % mode
    if mode == SYMLINK:
        return link_problem(path, links)
    return None


def lfs_pointer(data: bytes) -> tuple[str, int] | None:
    """(sha256 hex or "", size or -1) when `data` is a Git LFS pointer file, else None."""
    if not data.startswith(LFS_VERSIONS):
        return None
    oid, size = "", -1
    for line in data.decode("utf-8", "replace").splitlines()[1:]:
        key, _, value = line.partition(" ")
        if key == "oid" and re.match(r"^sha256:[0-9a-f]{64}$", value):
            oid = value[len("sha256:"):]
        elif key == "size" and value.isdigit():
            size = int(value)
    return oid, size
