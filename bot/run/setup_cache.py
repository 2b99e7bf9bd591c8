"""The setup cache: the state `setup:` left in a sandbox, kept so that later runs with the same key skip setup.

A cache entry is made from one run's sandbox, in which the repository's setup commands ran with network, so it
is reused only under the very same key: the repository, the sandbox's base (`setup_cache_base`: an image's id),
the setup commands and the content of the files decode.yml's `setup_cache_key` names, all read on the host from
the commit decode.yml comes from (`bot.workspace.trusted_files`). Caching is opt-in: without `setup_cache_key` (an empty list opts in on image and
commands alone) nothing is cached, since a cache that does not see the lock files would keep stale dependencies.
An entry is saved only after every setup command passed (a failed or timed-out setup raises before), and only
when the workspace is the commit decode.yml is read from: a pull request's head (a fork's code, run by `pip
install -e .`) may use the cache but never fills it. The archive of setup's files is untrusted data on the host:
its headers are checked (`archive_problem`) before any of it is used, and it is unpacked inside the sandbox only.

What each backend keeps (launchers with `Capabilities.setup_cache` implement `CachingLauncher`; the archive's
scripts are shared, bot/sandbox/setup_files.py):
- docker: `docker commit` of the container into the local image `decode-setup-cache:<key>` (its bind mounts,
  HOME among them, are not in it), and the archive of setup's workspace files and HOME; a hit starts from that image.
- modal: `snapshot_filesystem()` (HOME and everything outside the workspace, kept by Modal for its 30-day ttl),
  and the archive of setup's workspace files; a hit starts from the snapshot, whose stale workspace is emptied
  before the run's own is uploaded. Modal offers no way to delete an image: clearing an entry forgets it.
- bwrap: the host's root is read-only and /run and the hidden paths are fresh tmpfs at every start, so setup's
  state is its workspace files and HOME, all of it in the archive. The base is a digest of the host toolchain
  the sandbox sees (bwrap.py `toolchain_digest`), since there is no image.

Entries live in `DECODE_DATA_DIR/setup-cache/` (0700): `<key>.json` (metadata, written last) and `<key>.tar`,
plus the backend's image (`Entry.tag`). At the start of each run, entries made more than `DECODE_KEEP_DAYS` ago
go, then the least recently used until all fit in `DECODE_SETUP_CACHE_MB` (default 10240; 0 turns the cache
off), counting the archive and, for docker, the image's own layer (Modal does not say how big a snapshot is).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import tarfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import ClassVar, Protocol, runtime_checkable

from bot.core.errors import ConfigError, SandboxError
from bot.workspace.run_dirs import DAY_S
from bot.sandbox import BACKENDS, SandboxSpec
from bot.sandbox.agentd.paths import link_problem, path_problem
from bot.sandbox.protocol import Capabilities, Launcher
from bot.sandbox.setup_files import TAG, Saved
from bot.workspace.kept import evict, read_entries, write_entry
from bot.workspace.trusted_files import Git, read_trusted

KEY_FILE_LIMIT = 64 * 1024 * 1024  # a lock file bigger than this is an error naming it
MB = 1024 * 1024
ROOTS = ("workspace", "home")


@runtime_checkable
class CachingLauncher(Protocol):
    """What a launcher with `Capabilities.setup_cache` offers besides the `Launcher` protocol."""

    capabilities: ClassVar[Capabilities]

    @classmethod
    def setup_cache_base(cls, image: str) -> str:
        """What an entry made from `image` is keyed on (its id); `ConfigError` when an entry's image is gone.
        A launcher without `Capabilities.image` runs on the host's toolchain and takes `path=spec.path` too."""
        ...

    @classmethod
    def drop_setup_cache(cls, tag: str) -> bool:
        """Delete an entry's image (True when there is none to delete); False while a sandbox uses it."""
        ...

    def save_setup_cache(self, tag: str, archive: Path, cap_bytes: int) -> Saved:
        """Keep the sandbox's state as `tag` and setup's files in `archive`, within `cap_bytes`."""
        ...

    def restore_setup_cache(self, archive: Path) -> None: ...


@dataclass(frozen=True)
class Entry:
    """One cache entry's metadata, as `<key>.json` holds it."""

    key: str
    repo: str
    mode: str
    image: str  # the base image as configured
    image_id: str
    created: float
    last_used: float
    size: int  # bytes: the archive plus the committed image's own layer
    ref: str = ""  # the image a hit starts from, as the launcher named it (`Saved.image`); "": `TAG:<key>`

    @property
    def tag(self) -> str:
        """The image a hit's sandbox starts from (`SandboxSpec.image`)."""
        return self.ref or f"{TAG}:{self.key}"


def cache_key(*, repo: str, mode: str, image_id: str, setup: Sequence[str], files: Mapping[str, bytes | None]) -> str:
    """The key of a setup's state: a sha256 over everything the state depends on (a missing file counts too)."""
    digests = {path: None if data is None else hashlib.sha256(data).hexdigest() for path, data in sorted(files.items())}
    text = json.dumps({"v": 1, "repo": repo, "mode": mode, "image": image_id, "setup": list(setup), "files": digests},
                      sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def key_files(git: Git, commit: str, paths: Sequence[str]) -> dict[str, bytes | None]:
    """The content of each `setup_cache_key` file at `commit` (None when absent), read as trusted blobs."""
    return {path: read_trusted(git, commit, path, limit=KEY_FILE_LIMIT) for path in paths}


def archive_problem(path: Path) -> str | None:
    """Why the archive at `path` must not be restored, or None: every entry under `workspace/` or `home/`, a
    relative path without `..` or `.git`, a file, directory or symlink; links resolve inside their root
    (`bot.sandbox.agentd.paths.link_problem`), and no entry lies below a link."""
    links: dict[str, dict[str, str]] = {root: {} for root in ROOTS}
    names: list[tuple[str, str]] = []
    try:
        with tarfile.open(path, "r:") as tar:
            for member in tar:
                root, _, rel = member.name.partition("/")
                if root not in ROOTS or not rel.strip("/"):
                    return f"{member.name!r} is not under workspace/ or home/"
                if problem := path_problem(rel):
                    return f"{member.name!r}: {problem}"
                if not (member.isreg() or member.isdir() or member.issym()):
                    return f"{member.name!r} is neither a file, a directory nor a symlink"
                if member.issym():
                    links[root][rel] = member.linkname
                names.append((root, rel))
    except (OSError, tarfile.TarError) as e:
        return f"the archive cannot be read: {e}"
    for root, rel in names:
        if rel in links[root] and (problem := link_problem(rel, links[root])):
            return f"{root}/{rel}: {problem}"
        parts = rel.split("/")
        if any("/".join(parts[:depth]) in links[root] for depth in range(1, len(parts))):
            return f"{root}/{rel} lies below a symlink"
    return None


class SetupCache:
    """The entries in one directory (`DECODE_DATA_DIR/setup-cache`)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def entries(self) -> list[Entry]:
        """Every complete entry, most recently used first; unreadable metadata is skipped."""
        return read_entries(self.directory, Entry)

    def get(self, key: str) -> Entry | None:
        return next((e for e in self.entries() if e.key == key), None)

    def archive(self, key: str) -> Path:
        return self.directory / f"{key}.tar"

    def write(self, entry: Entry) -> None:
        """Write `entry`'s metadata (atomically: the last step of a save)."""
        write_entry(self.directory, entry)

    def remove(self, entry: Entry) -> bool:
        """Delete `entry`: its image first (False, nothing deleted, while a sandbox still runs from it)."""
        launcher = BACKENDS.get(entry.mode)
        if launcher is not None and launcher.capabilities.setup_cache:
            if not launcher.drop_setup_cache(entry.tag):  # type: ignore[attr-defined]  # capabilities.setup_cache
                return False
        for path in (self.directory / f"{entry.key}.json", self.archive(entry.key)):
            path.unlink(missing_ok=True)
        return True

    def prune(self, keep_days: float, cap_bytes: int, *, now: float | None = None) -> list[Entry]:
        """Remove entries made more than `keep_days` ago, then the least recently used past `cap_bytes`."""
        now = time.time() if now is None else now
        removed = evict(self.entries(), cap_bytes, lambda e: e.created < now - keep_days * DAY_S, self.remove)
        for partial in self.directory.glob(".*.tar") if self.directory.is_dir() else ():  # a dead run's save
            if partial.stat().st_mtime < now - DAY_S:
                partial.unlink(missing_ok=True)
        return removed


@dataclass
class RunCache:
    """The setup cache as one run sees it: its key, the entry it found (a hit) and whether it may save one."""

    cache: SetupCache
    key: str
    repo: str
    mode: str
    image: str
    image_id: str
    may_save: bool
    cap_bytes: int
    hit: Entry | None = None
    refused: str | None = None  # why an entry under this key was thrown away instead of used

    @classmethod
    def plan(cls, cache: SetupCache, *, mode: str, spec: SandboxSpec, repo: str, setup: Sequence[str],
             key_paths: Sequence[str] | None, git: Git, commit: str, may_save: bool,
             cap_bytes: int) -> RunCache | None:
        """The run's cache, or None when it has none (no setup, no `setup_cache_key`, a backend without it, or
        a cap of 0); looks the key up and checks the entry's archive, throwing a bad entry away."""
        launcher = BACKENDS.get(mode)
        if not setup or key_paths is None or cap_bytes <= 0 or launcher is None \
                or not launcher.capabilities.setup_cache:
            return None
        base = launcher.setup_cache_base  # type: ignore[attr-defined]  # as capabilities.setup_cache promises
        image_id = base(spec.image) if launcher.capabilities.image else base(spec.image, path=spec.path)
        key = cache_key(repo=repo, mode=mode, image_id=image_id, setup=setup, files=key_files(git, commit, key_paths))
        run = cls(cache, key, repo, mode, spec.image, image_id, may_save, cap_bytes)
        entry = cache.get(key)
        if entry is not None:
            run.refused = archive_problem(cache.archive(key)) or _image_missing(launcher, entry.tag)
            if run.refused is None:
                run.hit = entry
            else:
                cache.remove(entry)
        return run

    def restore(self, launcher: Launcher) -> None:
        """Unpack the hit's archive into the sandbox started from its image, and mark the entry used."""
        assert self.hit is not None
        try:
            _caching(launcher).restore_setup_cache(self.cache.archive(self.key))
        except SandboxError as e:
            self.cache.remove(self.hit)
            raise SandboxError(f"the setup cache entry {self.key[:12]} could not be restored, and is removed: {e}; "
                               "run again to set up from scratch") from None
        self.cache.write(Entry(**{**asdict(self.hit), "last_used": time.time()}))

    def save(self, launcher: Launcher) -> str:
        """Keep the sandbox's state after a successful setup; returns what happened, for the transcript."""
        if not self.may_save:
            return "not saved: the workspace is not the commit decode.yml was read from (a pull request's head)"
        self.cache.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        partial = self.cache.directory / f".{self.key}.{os.getpid()}.{secrets.token_hex(4)}.tar"  # runs may race
        entry = Entry(self.key, self.repo, self.mode, self.image, self.image_id, time.time(), time.time(), 0)
        try:
            size, ref = _caching(launcher).save_setup_cache(entry.tag, partial, self.cap_bytes)
            if problem := archive_problem(partial):
                raise SandboxError(f"the archive would be refused at restore ({problem})")
            partial.replace(self.cache.archive(self.key))
        except SandboxError as e:
            partial.unlink(missing_ok=True)
            self.cache.remove(entry)
            return f"not saved: {e}"
        self.cache.write(Entry(**{**asdict(entry), "size": size, "ref": "" if ref == entry.tag else ref}))
        return f"saved ({size / MB:.1f} MB)"


def _caching(launcher: Launcher) -> CachingLauncher:
    """`launcher` as a `CachingLauncher`; a `SandboxError` for one whose backend keeps no setup cache (a run
    plans a cache only where `Capabilities.setup_cache` says the backend keeps one)."""
    if not isinstance(launcher, CachingLauncher):
        raise SandboxError(f"the {type(launcher).__name__} keeps no setup cache")
    return launcher


def _image_missing(launcher: object, tag: str) -> str | None:
    """Why the entry's image cannot be started (removed behind the cache's back), or None."""
    try:
        launcher.setup_cache_base(tag)  # type: ignore[attr-defined]  # a launcher with capabilities.setup_cache
    except ConfigError:
        return f"its image {tag} is no longer on the engine"
    return None
