"""`decode runs`: the runs a data directory holds, newest first, read from their record.json, a page at a time.

Each run directory under `DECODE_DATA_DIR/runs` (an attempt's included: `job-3.2`) is one line: its id,
repository, state, pull request (or branch when it opened none), final commit (on GitHub: the one GitHub
has, as every door records it after publishing), cost and wall time. Every figure is the
run's `RunResult` (bot/run/result.py), so a record of an earlier shape shows what it holds and a dash for
the rest; a directory without record.json is a run still going, or one whose process died, and shows as
`unfinished`. Runs are listed in the order they were made, read from the end of `runs.index`
(bot/workspace/run_dirs.py), so a page reads its own runs only, however many `runs/` holds; `--before ID`
is the page after the one that ended with ID.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from bot.core.errors import ConfigError
from bot.run.result import RunResult, read_record
from bot.workspace.run_dirs import newest

HEAD = ("id", "repository", "state", "pr or branch", "commit", "cost", "time")


@dataclass(frozen=True)
class Listed:
    """One run directory: its name and its result (None while unfinished)."""

    name: str
    result: RunResult | None


def list_runs(data_dir: Path, limit: int | None = None, *, before: str | None = None) -> list[Listed]:
    """The run directories of `data_dir`, newest first (in the order they were made), at most `limit` of them
    (None: every one) and, with `before`, only those made before that run."""
    runs = Path(data_dir) / "runs"
    if before is not None and not (runs / before).is_dir():
        raise ConfigError(f"--before {before}: there is no such run in {runs}: give an id `decode runs` shows")
    names = newest(runs, limit if limit is not None else sys.maxsize, before=before)
    return [Listed(name, read_record(runs / name)) for name in names]


def row(run: Listed) -> tuple[str, ...]:
    """The cells of one run's line."""
    result = run.result
    if result is None:
        return (run.name, "-", "unfinished", "-", "-", "-", "-")
    figures = result.figures
    return (run.name, result.repo or "-", result.state, result.pr_url or result.branch or "-",
            (result.commit or "-")[:12], f"${figures.cost_usd:.2f}" if figures else "-",
            _duration(figures.seconds) if figures else "-")


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
