"""What the web pages show of a run: its directory (the latest attempt), its result, a dashboard row.

A job's files live in `DECODE_DATA_DIR/runs/<run_id>`, a retry's attempt k in `<run_id>.<k>`
(bot/core/names.py); the pages show the latest. A row's figures are the job's `RunResult`
(bot/run/result.py): the one the store keeps, else the same value in the run's record.json (a runner that
died after the run, or a store older than results with figures); a queued or running job's are its
transcript's so far.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from bot.core.names import attempt_dir, job_id, key_parts, run_id
from bot.github.work import work_of
from bot.jobs.store import JobRecord, JobStore
from bot.run.result import Figures, RunResult, read_record
from bot.run.transcript import JSONL_NAME
from bot.run.transcript_pages import index

LIVE_STATES = ("queued", "running")
MAX_ATTEMPT_DIRS = 100  # a job is tried far fewer times (DECODE_MAX_ATTEMPTS)


@dataclass(frozen=True)
class RunRow:
    """One dashboard line: who asked for what where, how it went (`figures`: None when unknown)."""

    run_id: str
    repo: str
    number: int | None
    kind: str
    sender: str
    state: str
    created_at: float
    figures: Figures | None = None
    pr_url: str | None = None
    error: str | None = None

    @property
    def day(self) -> str:
        return time.strftime("%Y-%m-%d", time.gmtime(self.created_at))


def run_dir(data_dir: Path, run_id: str) -> Path | None:
    """The directory of the run's latest attempt, or None before it started: attempts are looked for one by one
    (`attempt_dir`), never by listing `runs/`, which holds every run of `DECODE_KEEP_DAYS`."""
    runs, found = Path(data_dir) / "runs", None
    for attempt in range(1, MAX_ATTEMPT_DIRS + 1):
        path = runs / attempt_dir(run_id, attempt)
        if path.is_dir():
            found = path
        elif attempt > 1:
            break
    return found


def job_of(store: JobStore, run_id: str) -> JobRecord | None:
    """The job behind `job-<N>`, or None when the store has none."""
    number = job_id(run_id)
    if number is None:
        return None
    try:
        return store.job(number)
    except KeyError:
        return None


def row_of(job: JobRecord, data_dir: Path) -> RunRow:
    """The dashboard row of `job`; a result of an earlier shape shows what it holds."""
    rid = run_id(job.id)
    try:
        work = work_of(job.payload)
        repo, number, kind, sender = work.repo, work.number, work.kind, work.sender_login
    except (KeyError, TypeError, ValueError):  # a payload this version cannot read: the key still names the repo
        (repo, number), kind, sender = key_parts(job.key), "?", "?"
    result = RunResult.from_json(job.result, run_id=rid)
    figs = result.figures if result is not None else None
    if figs is None:
        figs = _so_far(data_dir, rid) if job.state in LIVE_STATES else _recorded(data_dir, rid)
    return RunRow(run_id=rid, repo=repo, number=number, kind=kind, sender=sender, state=job.state,
                  created_at=job.created_at, figures=figs, pr_url=result.pr_url if result is not None else None,
                  error=(result.error if result is not None else None) or job.error)


def _recorded(data_dir: Path, rid: str) -> Figures | None:
    """The figures of the run's record.json, None without one."""
    record = read_record(run_dir(data_dir, rid))
    return record.figures if record is not None else None


def _so_far(data_dir: Path, rid: str) -> Figures | None:
    """A live run's turns, cost and time so far, from its transcript's index (bot/run/transcript_pages.py:
    cached, and carried on from where it stopped as the transcript grows), never the whole file again."""
    directory = run_dir(data_dir, rid)
    if directory is None or not (directory / JSONL_NAME).exists():
        return None
    return index(directory / JSONL_NAME).tally.figures()


def daily_totals(rows: Iterable[RunRow]) -> list[tuple[str, int, float]]:
    """(UTC day, runs, cost in USD) for each day the rows cover, newest first."""
    days: dict[str, list[float]] = {}
    for row in rows:
        entry = days.setdefault(row.day, [0, 0.0])
        entry[0] += 1
        entry[1] += row.figures.cost_usd if row.figures is not None else 0.0
    return [(day, int(n), cost) for day, (n, cost) in sorted(days.items(), reverse=True)]
