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

Bounds, as the setup cache's (`bot.run.setup_cache`): a mirror unused for more
than `DECODE_KEEP_DAYS` goes, then the least recently used until all fit in
`DECODE_MIRROR_MB` (0: no mirrors, every run clones from the remote). A mirror
in use (its lock held) is never removed.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bot.config import Settings
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
    size: int  # bytes on disk after the last fetch


class Mirrors:
    """The mirrors in one directory (`DECODE_DATA_DIR/mirrors`)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @classmethod
    def of(cls, settings: Settings) -> Mirrors | None:
        """The mirrors `settings` keep (`DECODE_DATA_DIR/mirrors`), or None when `DECODE_MIRROR_MB` is 0."""
        return cls(settings.store.data_dir / "mirrors") if settings.store.mirror_mb > 0 else None

    def prune_for(self, settings: Settings) -> list[Mirror]:
        """`prune` by `settings`' bounds (DECODE_KEEP_DAYS, DECODE_MIRROR_MB)."""
        return self.prune(settings.store.keep_days, settings.store.mirror_mb * 1024 * 1024)

    @staticmethod
    def key(url: str) -> str:
        return hashlib.sha256(url.encode()).hexdigest()[:24]

    def path(self, key: str) -> Path:
        return self.directory / f"{key}.git"

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
    def updated(self, url: str, run: Run) -> Iterator[Path]:
        """The mirror of `url`, fetched up to date, held locked while the caller clones from it.

        `run(args, cwd, what=, ok=)` runs git with the token's environment (for the remote) and the run's
        redactor. A mirror whose metadata is gone is made again from scratch; git's lock files a killed run
        left are removed (the flock says no other run is in it)."""
        key = self.key(url)
        mirror = self.path(key)
        with self._locked(key):
            meta = next((m for m in self.entries() if m.key == key), None)
            if meta is None or not (mirror / "HEAD").is_file():
                shutil.rmtree(mirror, ignore_errors=True)
                run(["init", "--quiet", "--bare", "--template=", str(mirror)], self.directory, what="making the mirror")
            for stale in [*mirror.glob("*.lock"), *(mirror / "refs").rglob("*.lock")]:
                stale.unlink(missing_ok=True)
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
            now = time.time()
            write_entry(self.directory, Mirror(key, url, meta.created if meta else now, now, _size(mirror)))
            yield mirror

    def remove(self, entry: Mirror) -> bool:
        """Delete `entry`'s mirror; False (nothing deleted) while a run holds it."""
        with self._locked(entry.key, wait=False) as held:
            if not held:
                return False
            (self.directory / f"{entry.key}.json").unlink(missing_ok=True)
            shutil.rmtree(self.path(entry.key), ignore_errors=True)
            return True

    def prune(self, keep_days: float, cap_bytes: int, *, now: float | None = None) -> list[Mirror]:
        """Remove mirrors unused for more than `keep_days`, then the least recently used past `cap_bytes`."""
        now = time.time() if now is None else now
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

