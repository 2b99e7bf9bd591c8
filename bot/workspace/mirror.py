"""A bare mirror per remote under `DECODE_DATA_DIR/mirrors`: a run fetches only what is new, then clones locally.

Each remote URL gets `<sha256 of the URL>[:24].git` (bare, never shown to a
sandbox), `<same>.json` (the URL, when it was made and last used, its size) and
`<same>.lock`. A run takes the lock (`fcntl.flock`, exclusive) for the fetch
and for its local clone, so two runs of one repository that start together
fetch one after the other: the second fetches nothing new. The fetch forces
every branch and tag to the remote's and prunes the ones gone
(`+refs/heads/*:refs/heads/*`, `+refs/tags/*:refs/tags/*`, `--prune`), so a
force-push between runs is seen as it is; HEAD follows the remote's default
branch (`git ls-remote --symref`).

No token is ever stored: the URL has none (`prepare` refuses one that does),
and the token reaches git only as an `http.extraHeader` in the environment of
the command (`clone.git_env`). The mirror's config is `git init --bare`'s
alone: the URL is given on each command line.

The run's clone is a plain local clone of the mirror (hardlinked object files,
no alternates): pruning, repacking or removing the mirror later unlinks only
the mirror's names for those files, so a clone never depends on the mirror.
`--shared` or `--reference` without `--dissociate` would borrow the mirror's
objects and break when it is pruned; `--dissociate` repacks, which costs more
than the hardlinks. Git never writes into an existing object file, so sharing
the inode is safe for the host's own clone.

Beside each mirror a run may leave `<key>.tree`: a checkout of the remote's default branch made
from the mirror by the host alone (`keep_tree`, on a thread while the agent works), never shown to
a sandbox until a run takes it. The next run of the repository takes it instead of checking 8,000
files out (`updated(..., take_tree=)`: a rename under the lock, so two runs never take one tree)
and brings it to its base by a local fetch and a checkout that rewrites only what differs
(`bot.workspace.clone`). The tree is that run's workspace from then on, deleted with it; the
next tree is made again from the mirror. Its object files are copies, never hardlinks: a sandbox
owns its workspace's files and must not reach the mirror's.

Bounds, as the setup cache's (`bot.run.setup_cache`): a mirror unused for more
than `DECODE_KEEP_DAYS` goes, then the least recently used until all fit in
`DECODE_MIRROR_MB` (0: no mirrors, every run clones from the remote). A mirror
in use (its lock held) is never removed.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from pathlib import Path

from bot.config import StoreSettings
from bot.core.trees import remove_tree
from bot.workspace.kept import evict, read_entries, write_entry
from bot.workspace.run_dirs import DAY_S

MAX_PACKS = 20  # one pack per fetch (`fetch.unpackLimit=1`, few files to hardlink); past this, one repack
REFSPECS = ("+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*")

Run = Callable[..., bytes]  # (args, cwd, *, what, ok=) -> stdout, with the run's env and redactor


@dataclass(frozen=True)
class Mirror:
    """One mirror's metadata, as `<key>.json` holds it."""

    key: str
    url: str
    created: float
    last_used: float
    size: int  # bytes on disk: the mirror after its last fetch, and its kept tree
    tree: int = 0  # bytes of the kept tree (`<key>.tree`), 0 when there is none


class Mirrors:
    """The mirrors in one directory (`DECODE_DATA_DIR/mirrors`)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @classmethod
    def of(cls, store: StoreSettings) -> Mirrors | None:
        """The mirrors `store` keeps (`DECODE_DATA_DIR/mirrors`), or None when `DECODE_MIRROR_MB` is 0."""
        return cls(store.data_dir / "mirrors") if store.mirror_mb > 0 else None

    def prune_for(self, store: StoreSettings) -> list[Mirror]:
        """`prune` by the `store` settings' bounds (DECODE_KEEP_DAYS, DECODE_MIRROR_MB)."""
        return self.prune(store.keep_days, store.mirror_mb * 1024 * 1024)

    @staticmethod
    def key(url: str) -> str:
        return hashlib.sha256(url.encode()).hexdigest()[:24]

    def path(self, key: str) -> Path:
        return self.directory / f"{key}.git"

    def tree(self, key: str) -> Path:
        return self.directory / f"{key}.tree"

    def entries(self) -> list[Mirror]:
        """Every mirror with readable metadata, most recently used first."""
        return read_entries(self.directory, Mirror)

    @contextmanager
    def _locked(self, key: str, *, wait: bool = True) -> Iterator[bool]:
        """Hold `key`'s lock (True), or, with `wait=False`, yield False when another process holds it."""
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.directory, 0o700)
        fd = os.open(self.directory / f"{key}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            os.close(fd)

    @contextmanager
    def updated(self, url: str, run: Run, *, take_tree: Path | None = None) -> Iterator[tuple[Path, bool]]:
        """The mirror of `url`, fetched up to date, held locked while the caller clones from it; and whether
        its kept tree was moved to `take_tree` (when given and there is one).

        `run(args, cwd, what=, ok=)` runs git with the token's environment (for the remote) and the run's
        redactor. A mirror whose metadata is gone is made again from scratch; git's lock files a killed run
        left are removed (the flock says no other run is in it)."""
        key = self.key(url)
        mirror = self.path(key)
        with self._locked(key):
            meta = next((m for m in self.entries() if m.key == key), None)
            if meta is None or not (mirror / "HEAD").is_file():
                remove_tree(mirror)
                remove_tree(self.tree(key))
                run(["init", "--quiet", "--bare", "--template=", str(mirror)], self.directory, what="making the mirror")
            for stale in [*mirror.glob("*.lock"), *(mirror / "refs").rglob("*.lock")]:
                stale.unlink(missing_ok=True)
            self._fetch(url, mirror, run)
            taken = take_tree is not None and self.tree(key).is_dir() and _moved(self.tree(key), take_tree)
            tree = meta.tree if meta is not None and not taken and self.tree(key).is_dir() else 0
            now = time.time()
            write_entry(self.directory, Mirror(key, url, meta.created if meta else now, now, _size(mirror) + tree,
                                               tree))
            yield mirror, taken

    @staticmethod
    def _fetch(url: str, mirror: Path, run: Run) -> None:
        """Fetch every branch and tag of `url` into `mirror` and follow its HEAD; repack past MAX_PACKS."""
        with ThreadPoolExecutor(1) as pool:  # the remote's HEAD asked while the fetch runs: one round trip less
            head = pool.submit(run, ["ls-remote", "--symref", "--", url, "HEAD"], mirror,
                               what="reading the remote's HEAD")
            run(["-c", "fetch.unpackLimit=1", "fetch", "--quiet", "--prune", "--no-tags", "--", url, *REFSPECS],
                mirror, what=f"fetching into the mirror of {url}")
            first = head.result().decode().split("\n", 1)[0]
        if first.startswith("ref: refs/heads/") and first.endswith("\tHEAD"):
            run(["symbolic-ref", "HEAD", first[len("ref: "):-len("\tHEAD")]], mirror, what="setting HEAD")
        if len(list((mirror / "objects" / "pack").glob("*.pack"))) > MAX_PACKS:
            run(["repack", "-a", "-d", "-q"], mirror, what="repacking the mirror")

    def keep_tree(self, url: str, run: Run) -> bool:
        """Make `url`'s kept tree (see the module docstring) unless it has one; whether one was made.

        `run(args, cwd, what=)` runs git with the host's hardened environment (local paths allowed). The tree is checked out
        in a private temporary directory and renamed into place under the lock; a mirror removed meanwhile,
        or a tree another run made first, leaves it deleted. A repository with submodules gets none (its runs
        copy them from the clean clone)."""
        key = self.key(url)
        if self.tree(key).exists() or not (self.path(key) / "HEAD").is_file():
            return False
        scratch = Path(tempfile.mkdtemp(prefix=f".{key}.tree-", dir=self.directory))
        try:
            made = scratch / "tree"
            with self._locked(key):  # no prune or repack while its pack files are copied
                run(["clone", "--quiet", "--template=", "--local", "--no-hardlinks", "--no-checkout", "--",
                     str(self.path(key)), str(made)], scratch, what="copying the mirror for its kept tree")
            run(["remote", "remove", "origin"], made, what="detaching the kept tree")
            run(["checkout", "--quiet", "--detach"], made, what="checking out the kept tree")
            branch = run(["for-each-ref", "--format=%(refname:short)", "refs/heads/"], made, what="reading branches")
            for name in branch.decode().split():
                run(["branch", "--quiet", "-D", name], made, what="detaching the kept tree")
            if any(line.startswith(b"160000 ") for line in
                   run(["ls-files", "--stage"], made, what="listing submodules").splitlines()):
                return False
            size = _size(made)
            with self._locked(key):
                meta = next((m for m in self.entries() if m.key == key), None)
                if meta is None or self.tree(key).exists():
                    return False
                os.rename(made, self.tree(key))
                write_entry(self.directory, replace(meta, size=meta.size - meta.tree + size, tree=size))
            return True
        finally:
            remove_tree(scratch)

    def remove(self, entry: Mirror) -> bool:
        """Delete `entry`'s mirror; False (nothing deleted) while a run holds it."""
        with self._locked(entry.key, wait=False) as held:
            if not held:
                return False
            (self.directory / f"{entry.key}.json").unlink(missing_ok=True)
            remove_tree(self.path(entry.key))
            remove_tree(self.tree(entry.key))
            return True

    def prune(self, keep_days: float, cap_bytes: int, *, now: float | None = None) -> list[Mirror]:
        """Remove mirrors unused for more than `keep_days`, then the least recently used past `cap_bytes`."""
        now = time.time() if now is None else now
        for scratch in self.directory.glob(".*.tree-*"):  # a tree a killed run was making
            with suppress(OSError):
                if scratch.stat().st_mtime < now - DAY_S:
                    remove_tree(scratch)
        return evict(self.entries(), cap_bytes, lambda e: e.last_used < now - keep_days * DAY_S, self.remove)


def _size(path: Path) -> int:
    """The bytes of the files under `path`."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except FileNotFoundError:
                continue
    return total


def _moved(source: Path, target: Path) -> bool:
    """Rename `source` to `target`; False when it cannot be (another file system: the run checks out afresh)."""
    try:
        os.rename(source, target)
        return True
    except OSError:
        return False
