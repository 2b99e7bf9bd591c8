"""The run directories under `DECODE_DATA_DIR/runs`: made private, emptied of clones, pruned.

A run directory holds, while the run is on, two clones of the repository (the
host's clean clone and the sandbox's copy). The copy goes when the sandbox is
done; the clean clone once its commit is published (pushed, or fetched into the
user's repository), or at once when there is nothing to publish. What stays is
small: transcript.jsonl, transcript.md and record.json. Whole run directories are
pruned `DECODE_KEEP_DAYS` after their last write, so the space `runs/` uses is
bounded by the runs of that many days (plus the clones of unpublished work,
which are kept as long, so that no commit is lost to a failed push).
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from pathlib import Path


log = logging.getLogger(__name__)

CLONES = ("workspace", "clean")
DAY_S = 86400.0
PRUNE_EVERY_S = 3600.0  # a pass over runs/ at most this often, whatever the number of runs starting
MARKER = ".pruned"  # in runs/: its change time says when the last pass began (in any process)


def fresh_dir(parent: Path, name: str) -> Path:
    """`parent/name`, or `name-2`, `name-3`... when an earlier run (a re-run workflow, a retry) left it."""
    candidate, n = parent / name, 1
    while candidate.exists():
        n += 1
        candidate = parent / f"{name}-{n}"
    for d in (*reversed(candidate.parents[:2]), candidate):  # the data dir, runs/ and the run itself: 0700
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
        d.chmod(0o700)
    return candidate


def drop_clones(run_dir: Path) -> None:
    """Delete the run's clones, keeping its transcripts and record."""
    for name in CLONES:
        shutil.rmtree(run_dir / name, ignore_errors=True)


def prune(runs: Path, keep_days: float, *, now: float | None = None, every_s: float = PRUNE_EVERY_S) -> list[str]:
    """Delete the run directories under `runs` whose last write is more than `keep_days` old; their names.

    A run's last write is the newest modification time of its directory and the files in it (the
    transcript is appended to as the run goes), so a run in progress is never taken. A pass goes at most
    once per `every_s` across the processes sharing `runs` (the `MARKER` file): with thousands of runs kept,
    every run starting would otherwise walk all of them beside its work.
    """
    now = time.time() if now is None else now
    if not _due(runs / MARKER, now, every_s):
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
        shutil.rmtree(run_dir, ignore_errors=True)
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
