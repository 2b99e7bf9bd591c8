"""The run directories under `DECODE_DATA_DIR/runs`: made private, emptied of clones, pruned.

A run directory holds, while the run is on, two clones of the repository (the
host's clean clone and the sandbox's copy). The copy goes when the sandbox is
done; the clean clone once its commit is published (pushed, or fetched into the
user's repository), or at once when there is nothing to publish. What stays is
small: transcript.jsonl, transcript.md and record.json. Each directory made is named at the end of
`runs.index` (beside `runs/`, which holds run directories only), which `decode runs` reads from its end, a page at a time. Whole run directories are
pruned `DECODE_KEEP_DAYS` after their last write (at most one pass an hour), so the space `runs/` uses is
bounded by the runs of that many days (plus the clones of unpublished work,
which are kept as long, so that no commit is lost to a failed push).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

from bot.core.files import create_once
from bot.core.trees import remove_tree


log = logging.getLogger(__name__)

CLONES = ("workspace", "clean")
DAY_S = 86400.0
PRUNE_EVERY_S = 3600.0  # a pass over runs/ at most this often, whatever the number of runs starting
MARKER = ".pruned"  # beside runs/ (`runs.pruned`): its change time says when the last pass began (any process)
INDEX = ".index"  # beside runs/ (`runs.index`): the run directories' names, one a line, in the order made
_BLOCK = 64 * 1024


def fresh_dir(parent: Path, name: str) -> Path:
    """`parent/name`, or `name-2`, `name-3`... when an earlier run (a re-run workflow, a retry) left it."""
    candidate, n = parent / name, 1
    while candidate.exists():
        n += 1
        candidate = parent / f"{name}-{n}"
    _index(parent)  # an older data dir's, before this run is in it
    for d in (*reversed(candidate.parents[:2]), candidate):  # the data dir, runs/ and the run itself: 0700
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
        d.chmod(0o700)
    with open(parent.with_name(parent.name + INDEX), "a", encoding="utf-8") as f:  # one short O_APPEND write: whole among processes
        f.write(candidate.name + "\n")
    return candidate


def newest(runs: Path, limit: int, *, before: str | None = None) -> list[str]:
    """The names of the newest `limit` run directories under `runs` (made after `before`'s, when given),
    newest first: read from the end of the `INDEX`, so a page costs what it lists however many runs are kept;
    a name whose directory was pruned is passed over."""
    found: list[str] = []
    seen = before is None
    for name in _backwards(_index(runs)):
        if not seen:
            seen = name == before
        elif (runs / name).is_dir() and name not in found:
            found.append(name)
            if len(found) == limit:
                break
    return found


def _index(runs: Path) -> Path:
    """The `INDEX` of `runs`, made from a listing (oldest change first) the first time: a data dir from
    before the index, or runs made by hand."""
    path = runs.with_name(runs.name + INDEX)
    if path.exists() or not runs.is_dir():
        return path
    with os.scandir(runs) as entries:
        dated = sorted((e.stat().st_mtime, e.name) for e in entries if e.is_dir(follow_symlinks=False))
    # made whole or not at all, once: threads (a run's attempts) and processes may list at the same time
    create_once(path, "".join(f"{name}\n" for _, name in dated).encode(), 0o644)
    return path


def _backwards(path: Path) -> Iterator[str]:
    """The lines of `path`, last first, read a block at a time from its end."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return
    with f:
        end, tail = f.seek(0, os.SEEK_END), b""
        while end > 0:
            start = max(0, end - _BLOCK)
            f.seek(start)
            lines = (f.read(end - start) + tail).split(b"\n")
            tail, end = (lines.pop(0) if start > 0 else b""), start
            for line in reversed(lines):
                if line.strip():
                    yield line.decode("utf-8", "replace")


def drop_clones(run_dir: Path) -> None:
    """Delete the run's clones, keeping its transcripts and record."""
    for name in CLONES:
        remove_tree(run_dir / name)


def prune(runs: Path, keep_days: float, *, now: float | None = None, every_s: float = PRUNE_EVERY_S) -> list[str]:
    """Delete the run directories under `runs` whose last write is more than `keep_days` old; their names.

    A run's last write is the newest modification time of its directory and the files in it (the
    transcript is appended to as the run goes), so a run in progress is never taken. A pass goes at most
    once per `every_s` across the processes sharing `runs` (the `MARKER` file): with thousands of runs kept,
    every run starting would otherwise walk all of them beside its work.
    """
    now = time.time() if now is None else now
    if not _due(runs.with_name(runs.name + MARKER), now, every_s):
        return []
    cutoff = now - keep_days * DAY_S
    pruned = []
    try:
        entries = list(runs.iterdir())
    except FileNotFoundError:
        return []
    except OSError as e:  # it runs on a thread beside the run (bot.run.pipeline): say so, never raise
        log.warning("could not prune the run directories in %s: %s", runs, e)
        return []
    for run_dir in entries:
        try:
            if not run_dir.is_dir() or run_dir.is_symlink() or last_write(run_dir) >= cutoff:
                continue
        except OSError:
            continue  # removed meanwhile by another process pruning the same directory
        remove_tree(run_dir)
        pruned.append(run_dir.name)
    if pruned:
        log.info("pruned %d run directories older than %g days from %s", len(pruned), keep_days, runs)
    return pruned


def _due(marker: Path, now: float, every_s: float) -> bool:
    """Whether a pass is due, claiming it when it is: the marker is older than `every_s` (or missing)."""
    try:
        if now - marker.stat().st_mtime < every_s:
            return False
        os.utime(marker, (now, now))
    except FileNotFoundError:
        try:
            marker.touch()
        except OSError:  # no runs/ yet: nothing to prune
            return False
    except OSError:
        return True
    return True


def last_write(run_dir: Path) -> float:
    """The newest mtime of `run_dir` and its direct entries (not following links)."""
    newest = run_dir.lstat().st_mtime
    for entry in run_dir.iterdir():
        try:
            newest = max(newest, entry.lstat().st_mtime)
        except FileNotFoundError:
            continue
    return newest
