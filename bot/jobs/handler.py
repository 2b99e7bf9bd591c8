"""What running a queued job means: the GitHub job of its work, and the report of one given up on.

Every runner uses these: the worker threads of `decode serve` and `decode
worker`, and the `run_job` function call of the Modal app. A finished run's
conclusion is stored as its record (`Conclusion.record`: state, exit code,
error, links, figures); its figures (`RunFigures`) go to `record`, which is how
they reach /metrics (`Metrics.record_run`); on Modal the record is the call's
return value, and the control app records its figures.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bot.config import Settings
from bot.github.forge import Forge
from bot.github.conclusion import marker
from bot.github.job import run_github_job
from bot.github.labels import add_trigger_labels
from bot.jobs.lease import Outcome
from bot.model import Model
from bot.jobs.store import JobRecord
from bot.github.work import Labels, work_of

log = logging.getLogger("decode.worker")


@dataclass(frozen=True)
class RunFigures:
    """What one agent run took: wall time, tokens by kind, cost; `state` is how its job concluded."""

    state: str
    seconds: float
    tokens: dict[str, int]  # input, output, cache_read, cache_write
    cost_usd: float

    @classmethod
    def of(cls, record: dict[str, Any]) -> "RunFigures | None":
        """The figures of a job's record (`Conclusion.record`), None when no agent ran."""
        figures = record.get("figures")
        if not figures:
            return None
        return cls(state=record["state"], seconds=figures["seconds"], tokens=figures["tokens"],
                   cost_usd=figures["cost_usd"])


Record = Callable[[RunFigures], None]


def run_id_of(job: JobRecord) -> str:
    """Stable across attempts, so a retried job finds the comments and branch of the last one."""
    return f"job-{job.id}"


def outcome_of(record: dict[str, Any]) -> Outcome:
    """The lease outcome of a job's record: failed with its one-line error, or done."""
    if record.get("state") == "failed":
        return Outcome(result=record, error=record.get("error") or "failed")
    return Outcome(result=record)


def job_handler(settings: Settings, forge: Forge, record: Record | None = None, *,
                model: Model | None = None) -> Callable[[JobRecord], Outcome]:
    """What a runner does with a claimed job: the GitHub job, its figures to `record`, logs keyed by job id;
    `model` is the process's shared model (`bot.model.shared_model`), None to make one per run.

    Returns the outcome to store: the conclusion's record, failed when the job failed.
    """

    def handle(job: JobRecord) -> Outcome:
        work = work_of(job.payload)
        extra = {"job_id": job.id, "delivery_id": job.delivery_id}
        log.info("job %s: %s on %s#%s (attempt %d)", job.id, work.kind, work.repo, work.number,
                 job.attempts, extra=extra)
        if isinstance(work, Labels):
            conclusion = add_trigger_labels(work, forge, settings.github.trigger_label)
        else:
            conclusion = run_github_job(work, settings, forge, run_id=run_id_of(job), attempt=job.attempts,
                                        model=model, progress=lambda line: log.info(line, extra=extra))
        result = conclusion.record()
        if record is not None and (figures := RunFigures.of(result)) is not None:
            record(figures)
        log.info("job %s: %s %s", job.id, conclusion.state, conclusion.pr_url or "", extra=extra)
        return outcome_of(result)

    return handle


def exhausted_reporter(forge: Forge) -> Callable[[JobRecord], None]:
    """Tell the issue that a job was given up on after its worker died on every attempt."""

    def report(job: JobRecord) -> None:
        work = work_of(job.payload)
        log.error("job %s: %s", job.id, job.error, extra={"job_id": job.id})
        if work.number is None:
            return
        tag = marker("run", run_id_of(job))
        text = (f"❌ decode-bot gave up on this after {job.attempts} attempts: the worker stopped each time "
                f"(crash, restart or out of memory). Comment again to retry.\n\n{tag}")
        existing = forge.find_comment(work.repo, work.number, tag)
        if existing is None:
            forge.post_comment(work.repo, work.number, text, tag)
        else:
            forge.edit_comment(work.repo, existing, text)

    return report
