"""The hand-back: the workspace's changes as a binary git patch, and what that patch leaves out.

`check` tells the agent, before it answers, what the host would leave out of
its commit and why; `export` writes the patch to a file that `export_read`
hands over in chunks, so no answer line is large. Both stage the workspace's
tree in a scratch index against the base commit (`Stage`).
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import stat
import subprocess
import tempfile
from typing import Any

from .paths import (
    GITLINK,
    LFS_NEW_REASON,
    LFS_POINTER_MAX,
    LFS_REASON,
    SYMLINK,
    Refused,
    Workspace,
    lfs_pointer,
    mode_problem,
    path_problem,
)
from .scratch import run_git, scratch_repo, split_z, zip_z
from .submodules import submodule_changes

READ_CHUNK = 4 * 1024 * 1024
REGULAR = ("100644", "100755")


class Stage(object):
    """The workspace's resulting tree in a throwaway index against commit `base`.

    The git dir borrows the workspace's objects, so nothing the agent planted in
    the workspace's .git (config, hooks, fsmonitor, filters) is read or run.
    Some entries keep their base version in the index and are named in `left`
    (path -> why) when the agent changed them: files over `max_file_bytes`
    (never added nor hashed), submodules (`submodule_changes`: decode-bot
    commits to this repository only) and Git LFS files (`lfs_changes`: the
    hand-back does not carry LFS content).
    """

    def __init__(self, ws: Workspace, base: object, max_file_bytes: int | None = None) -> None:
        if not isinstance(base, str) or not re.match(r"^[0-9a-f]{40}([0-9a-f]{24})?$", base):
            raise Refused("base must be a full commit id")
        self.ws, self.base = ws, base
        self.tmp = tempfile.mkdtemp(prefix="decode-export-")
        try:
            self.env = scratch_repo(self.tmp, [os.path.join(ws.root, ".git", "objects")], ws.root)
            self.git("read-tree", base)
            tracked = dict((path, meta.split()) for meta, path in zip_z(self.git("ls-files", "-s", "-z")))
            self.left = {}
            keep: set[str] = set()  # paths whose base entry stays in the index, whatever the worktree holds
            self.left.update(submodule_changes(ws.root, tracked, keep))
            self.left.update(self.lfs_changes(tracked, keep))
            self.big = self.oversized(max_file_bytes, tracked, keep) if max_file_bytes else {}
            self.left.update(self.big)
            spec = [":(exclude,literal)" + p for p in sorted(keep | set(self.big))]
            self.git("add", "-A", "--", ".", *spec)
            self.left.update(self.new_lfs_files())
        except BaseException:
            self.close()
            raise

    def git(self, *args: str, **kw: Any) -> bytes:
        """git's stdout (or `stdout=FILE`), in the scratch git dir; a failure is refused with git's stderr."""
        res = run_git(list(args), self.env, self.ws.root, input=kw.get("input"),
                      stdout=kw.get("stdout", subprocess.PIPE))
        if res.returncode != 0:
            raise Refused("git %s failed: %s" % (args[0], res.stderr.decode("utf-8", "replace").strip()))
        return res.stdout

    def oversized(self, limit: int, tracked: dict, keep: set) -> dict:
        """Changed or new files over `limit` bytes -> why they are left out (tracked files are compared first)."""
        untracked = split_z(self.git("ls-files", "-o", "-z", "--exclude-standard"))
        big, submodules = {}, tuple(p + "/" for p in keep if tracked.get(p, ("",))[0] == GITLINK)
        for path in [p for p in tracked if p not in keep] + untracked:
            if submodules and path.startswith(submodules):
                continue
            try:
                st = os.lstat(os.path.join(self.ws.root, path))
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode) or st.st_size <= limit:
                continue
            if path in tracked:
                same = self.git("hash-object", "--no-filters", "--", path).strip().decode() == tracked[path][1]
                if same:
                    continue
            big[path] = "%.0f MB, over the %.0f MB limit for one file (DECODE_MAX_FILE_MB)" % (
                st.st_size / 1048576.0, limit / 1048576.0)
        return big

    def lfs_changes(self, tracked: dict, keep: set) -> dict:
        """Files whose base blob is a Git LFS pointer: kept as in the base, and named when the agent changed them.

        A file is unchanged when it still holds the pointer, or the content the
        pointer names (its size and sha256), as a host with git-lfs checks out.
        """
        small = [(path, meta) for path, meta in tracked.items() if meta[0] in REGULAR]
        if not small:
            return {}
        sizes = self.git("cat-file", "--batch-check", input="".join(m[1] + "\n" for _, m in small).encode())
        candidates = [(path, meta) for (path, meta), line in zip(small, sizes.decode().splitlines())
                      if int(line.split(" ")[2]) <= LFS_POINTER_MAX]
        found = {}
        blobs = read_blobs(self, [meta[1] for _, meta in candidates])
        for path, meta in candidates:
            pointer = lfs_pointer(blobs[meta[1]])
            if pointer is None:
                continue
            keep.add(path)
            if not lfs_unchanged(os.path.join(self.ws.root, path), blobs[meta[1]], pointer, meta[0]):
                found[path] = LFS_REASON
        return found

    def new_lfs_files(self) -> dict:
        """New files that .gitattributes sends to Git LFS: taken out of the index and named (no LFS content is carried)."""
        raw = split_z(self.git("diff-index", "--cached", "-z", "--name-status", "--no-renames", self.base))
        added = [path for status, path in zip(raw[0::2], raw[1::2]) if status == "A"]
        if not added:
            return {}
        out = split_z(self.git("check-attr", "--cached", "-z", "--stdin", "filter",
                               input=b"".join(os.fsencode(p) + b"\0" for p in added)))
        lfs = sorted(set(out[i] for i in range(0, len(out) - 2, 3) if out[i + 2] == "lfs"))
        if lfs:
            self.git("update-index", "-z", "--force-remove", "--stdin",
                     input=b"".join(os.fsencode(p) + b"\0" for p in lfs))
        return dict((path, LFS_NEW_REASON) for path in lfs)

    def problems(self) -> list:
        """[path, why] for every entry of the resulting tree the host would leave out, big files included."""
        raw = split_z(self.git("diff-index", "--cached", "--raw", "-z", "--no-renames", "--no-abbrev", self.base))
        links = {}
        for meta, path in zip_z(self.git("ls-files", "-s", "-z")):
            if meta.split()[0] == SYMLINK:
                try:
                    links[path] = os.readlink(os.path.join(self.ws.root, path))
                except OSError:
                    links[path] = ""
        found = [[p, why] for p, why in sorted(self.left.items())]
        for meta, path in zip(raw[0::2], raw[1::2]):
            why = path_problem(path) or mode_problem(path, meta.lstrip(":").split(" ")[1], links)
            if why:
                found.append([path, why])
        return found

    def close(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def read_blobs(stage: Stage, shas: list) -> dict:
    """sha -> content for each blob in `shas` (small ones: LFS pointer candidates)."""
    shas = sorted(set(shas))
    if not shas:
        return {}
    out, found, at = stage.git("cat-file", "--batch", input="".join(s + "\n" for s in shas).encode()), {}, 0
    for sha in shas:
        end = out.index(b"\n", at)
        size = int(out[at:end].split(b" ")[2])
        found[sha], at = out[end + 1:end + 1 + size], end + 2 + size
    return found


def lfs_unchanged(full: str, blob: bytes, pointer: tuple, mode: str) -> bool:
    """Whether the file at `full` still holds the pointer `blob`, or the content it names, with the base's mode."""
    try:
        st = os.lstat(full)
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode) or (mode == "100755") != bool(st.st_mode & 0o100):
        return False
    oid, size = pointer
    if st.st_size == len(blob):
        with open(full, "rb") as f:
            if f.read() == blob:
                return True
    if not oid or st.st_size != size:
        return False
    digest = hashlib.sha256()
    with open(full, "rb") as f:
        for chunk in iter(lambda: f.read(READ_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest() == oid


def op_check(ws: Workspace, req: dict) -> dict:
    """What the hand-back would leave out, and why: {"left_out": [[path, why], ...]}."""
    stage = Stage(ws, req.get("base"), req.get("max_file_bytes"))
    try:
        return {"left_out": stage.problems()}
    finally:
        stage.close()


def op_export(ws: Workspace, req: dict) -> dict:
    """The workspace's changes against commit `base`, as a binary git patch kept in a file for
    `export_read`; files over `max_file_bytes`, changes inside submodules and to Git LFS files are left
    out and listed (`Stage.left`). Answers {"size", "left_out"}."""
    stage = Stage(ws, req.get("base"), req.get("max_file_bytes"))
    try:
        drop_export(ws)
        fd, ws.export_path = tempfile.mkstemp(prefix="decode-patch-")
        with os.fdopen(fd, "wb") as out:
            stage.git("diff", "--cached", "--binary", "--full-index", "--no-ext-diff", "--no-textconv",
                      "--no-color", "--no-renames", stage.base, stdout=out)
        left_out = [[p, why] for p, why in sorted(stage.left.items())]
        return {"size": os.path.getsize(ws.export_path), "left_out": left_out}
    finally:
        stage.close()


def op_export_read(ws: Workspace, req: dict) -> dict:
    """Up to `length` bytes of the last export from `offset`, base64; the file goes once read to the end."""
    path = ws.export_path
    if not path:
        raise Refused("no export to read: call export first")
    offset, length = int(req.get("offset") or 0), min(int(req.get("length") or READ_CHUNK), READ_CHUNK)
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read(length)
    if not data:
        drop_export(ws)
    return {"data": base64.b64encode(data).decode()}


def drop_export(ws: Workspace) -> None:
    """Remove the last export's patch file, if any."""
    path, ws.export_path = ws.export_path, None
    if path:
        try:
            os.unlink(path)
        except OSError:
            pass
