"""`decode runs`: the runs a data directory holds, newest first, read from their record.json, a page at a time.

Each run directory under `DECODE_DATA_DIR/runs` (an attempt's included: `job-3.2`) is one line: its id,
repository, state, pull request (or branch when it opened none), cost and wall time. Every figure is the
run's `RunResult` (bot/run/result.py), so a record of an earlier shape shows what it holds and a dash for
the rest; a directory without record.json is a run still going, or one whose process died, and shows as
`unfinished`. Runs are ordered by their directory's last change (record.json is written as a run ends),
so a page reads the record.json of its own runs only, however many `runs/` holds; `--before ID` is the page
after the one that ended with ID.
"""

from __future__ import annotations

import argparse
import heapq
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from bot.core.errors import ConfigError
from bot.run.result import RunResult, read_record

HEAD = ("id", "repository", "state", "pr or branch", "cost", "time")


@dataclass(frozen=True)
class Listed:
    """One run directory: its name, when it was last written, and its result (None while unfinished)."""

    name: str
    when: float
    result: RunResult | None


def list_runs(data_dir: Path, limit: int | None = None, *, before: str | None = None) -> list[Listed]:
    """The run directories of `data_dir`, newest first (by their last change), at most `limit` of them and,
    with `before`, only those older than that run's."""
    runs = Path(data_dir) / "runs"
    try:
        with os.scandir(runs) as entries:
            dated = [(entry.stat().st_mtime, entry.name) for entry in entries
                     if entry.is_dir(follow_symlinks=False)]
    except OSError:
        return []
    if before is not None:
        cut = next(((when, name) for when, name in dated if name == before), None)
        if cut is None:
            raise ConfigError(f"--before {before}: there is no such run in {runs}: give an id `decode runs` shows")
        dated = [run for run in dated if run < cut]
    newest = heapq.nlargest(limit, dated) if limit is not None else sorted(dated, reverse=True)
    return [Listed(name, when, read_record(runs / name)) for when, name in newest]


def row(run: Listed) -> tuple[str, ...]:
    """The cells of one run's line."""
    result = run.result
    if result is None:
        return (run.name, "-", "unfinished", "-", "-", "-")
    figures = result.figures
    return (run.name, result.repo or "-", result.state, result.pr_url or result.branch or "-",
            f"${figures.cost_usd:.2f}" if figures else "-", _duration(figures.seconds) if figures else "-")


def table(runs: list[Listed]) -> str:
    """The runs as aligned columns under a header line."""
    rows = [HEAD, *(row(run) for run in runs)]
    widths = [max(len(cells[i]) for cells in rows) for i in range(len(HEAD))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(cells, widths)).rstrip() for cells in rows)


def cmd_runs(args: argparse.Namespace, data_dir: Path) -> int:
    """`decode runs [--limit N]`: print the table of `data_dir`'s runs; 2 for a bad --limit."""
    if args.limit is not None and args.limit < 1:
        raise ConfigError(f"--limit {args.limit} is not valid: give a positive whole number")
    runs = list_runs(data_dir, args.limit, before=args.before)
    if not runs:
        print(f"no runs in {Path(data_dir) / 'runs'} (DECODE_DATA_DIR)", file=sys.stderr)
        return 0
    print(table(runs))
    return 0


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"
