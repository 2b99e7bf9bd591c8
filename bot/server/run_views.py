"""What the web pages show of a run: its directory (the latest attempt), its record, a dashboard row.

A job's files live in `DECODE_DATA_DIR/runs/<run_id>`, a retry's attempt k in `<run_id>.<k>`
(bot/run/pipeline.py); the pages show the latest. A finished job's figures come from the store's
`result["figures"]` when the job runner wrote them, else from the run's `record.json`.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.jobs.handler import run_id_of
from bot.workspace.run_dirs import RECORD
from bot.jobs.store import JobRecord, JobStore
from bot.run.transcript import JSONL_NAME, figures, load_events
from bot.github.work import work_of

LIVE_STATES = ("queued", "running")


@dataclass(frozen=True)
class RunRow:
    """One dashboard line: who asked for what where, how it went, what it cost."""

    run_id: str
    repo: str
    number: int | None
    kind: str
    sender: str
    state: str
    created_at: float
    turns: int | None = None
    cost_usd: float | None = None
    seconds: float | None = None
    pr_url: str | None = None
    error: str | None = None

    @property
    def day(self) -> str:
        return time.strftime("%Y-%m-%d", time.gmtime(self.created_at))


def run_dir(data_dir: Path, run_id: str) -> Path | None:
    """The directory of the run's latest attempt, or None before it started."""
    runs = Path(data_dir) / "runs"
    attempts = [(1, runs / run_id)] if (runs / run_id).is_dir() else []
    for path in runs.glob(f"{run_id}.*"):
        suffix = path.name[len(run_id) + 1:]
        if suffix.isdigit() and path.is_dir():
            attempts.append((int(suffix), path))
    return max(attempts)[1] if attempts else None


def read_record(directory: Path | None) -> dict[str, Any] | None:
    """The run's record.json (written when the run ended), or None while it is on or if unreadable."""
    if directory is None:
        return None
    try:
        record = json.loads((directory / RECORD).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def job_of(store: JobStore, run_id: str) -> JobRecord | None:
    """The job behind `job-<N>`, or None when the store has none."""
    match = re.fullmatch(r"job-([0-9]+)", run_id)
    if match is None:
        return None
    try:
        return store.job(int(match.group(1)))
    except KeyError:
        return None


def row_of(job: JobRecord, data_dir: Path) -> RunRow:
    """The dashboard row of `job`, its figures read defensively (older results carry none)."""
    run_id = run_id_of(job)
    try:
        work = work_of(job.payload)
        repo, number, kind, sender = work.repo, work.number, work.kind, work.sender_login
    except (KeyError, TypeError, ValueError):  # a payload this version cannot read: the key still names the repo
        repo, _, rest = job.key.partition("#")
        number, kind, sender = int(rest) if rest.isdigit() else None, "?", "?"
    result = job.result if isinstance(job.result, dict) else {}
    figures = result.get("figures") if isinstance(result.get("figures"), dict) else {}
    record = {} if figures else read_record(run_dir(data_dir, run_id)) or _so_far(data_dir, run_id, job.state)
    return RunRow(
        run_id=run_id, repo=repo, number=number, kind=kind, sender=sender, state=job.state,
        created_at=job.created_at, turns=_number(figures.get("turns", record.get("turns")), int),
        cost_usd=_number(figures.get("cost_usd", record.get("cost_usd")), float),
        seconds=_number(figures.get("seconds", record.get("wall_s")), float),
        pr_url=result.get("pr_url") if isinstance(result.get("pr_url"), str) else None,
        error=result.get("error") or job.error)


def _so_far(data_dir: Path, run_id: str, state: str) -> dict[str, Any]:
    """A live run's turns, cost and time so far, from its transcript."""
    directory = run_dir(data_dir, run_id) if state in LIVE_STATES else None
    if directory is None or not (directory / JSONL_NAME).exists():
        return {}
    return figures(load_events(directory / JSONL_NAME))


def daily_totals(rows: Iterable[RunRow]) -> list[tuple[str, int, float]]:
    """(UTC day, runs, cost in USD) for each day the rows cover, newest first."""
    days: dict[str, list[float]] = {}
    for row in rows:
        entry = days.setdefault(row.day, [0, 0.0])
        entry[0] += 1
        entry[1] += row.cost_usd or 0.0
    return [(day, int(n), cost) for day, (n, cost) in sorted(days.items(), reverse=True)]


def _number(value: object, kind: type) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return kind(value)
