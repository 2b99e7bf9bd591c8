"""What running a queued job means: the GitHub job of its trigger, and the report of one given up on.

Every runner uses these: the worker threads of `decode serve` and `decode
worker`, and the `run_job` function call of the Modal app. A finished run's
figures (`RunFigures`) go to `record`, which is how they reach /metrics
(`Metrics.record_run`); on Modal they travel back in the call's result.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bot.config import Settings
from bot.errors import DecodeError
from bot.github.forge import Forge
from bot.github.job import marker, run_github_job
from bot.store import JobRecord
from bot.triggers import trigger_of

log = logging.getLogger("decode.worker")


@dataclass(frozen=True)
class RunFigures:
    """What one agent run took: wall time, tokens by kind, cost; `state` is how its job concluded."""

    state: str
    seconds: float
    tokens: dict[str, int]  # input, output, cache_read, cache_write
    cost_usd: float


Record = Callable[[RunFigures], None]


def run_id_of(job: JobRecord) -> str:
    """Stable across attempts, so a retried job finds the comments and branch of the last one."""
    return f"job-{job.id}"


def job_handler(settings: Settings, forge: Forge, record: Record | None = None) -> Callable[[JobRecord], dict]:
    """What a runner does with a claimed job: the GitHub job, its figures to `record`, logs keyed by job id.

    Returns the job's result; raises `DecodeError` with the message when the job failed.
    """

    def handle(job: JobRecord) -> dict[str, Any]:
        trigger = trigger_of(job.payload)
        extra = {"job_id": job.id, "delivery_id": job.delivery_id}
        log.info("job %s: %s on %s#%s (attempt %d)", job.id, trigger.kind, trigger.repo, trigger.number,
                 job.attempts, extra=extra)
        conclusion = run_github_job(trigger, settings, forge, run_id=run_id_of(job), attempt=job.attempts,
                                    progress=lambda line: log.info(line, extra=extra))
        if record is not None and conclusion.outcome is not None:
            r = conclusion.outcome.result
            record(RunFigures(state=conclusion.state, seconds=r.wall_s, cost_usd=r.cost_usd, tokens={
                "input": r.usage.input_tokens, "output": r.usage.output_tokens,
                "cache_read": r.usage.cache_read_tokens, "cache_write": r.usage.cache_creation_tokens}))
        log.info("job %s: %s %s", job.id, conclusion.state, conclusion.pr_url or "", extra=extra)
        if conclusion.state == "failed":
            raise DecodeError(conclusion.message)
        return {"state": conclusion.state, "pr_url": conclusion.pr_url, "branch": conclusion.branch}

    return handle


def exhausted_reporter(forge: Forge) -> Callable[[JobRecord], None]:
    """Tell the issue that a job was given up on after its worker died on every attempt."""

    def report(job: JobRecord) -> None:
        trigger = trigger_of(job.payload)
        log.error("job %s: %s", job.id, job.error, extra={"job_id": job.id})
        if trigger.number is None:
            return
        tag = marker("run", run_id_of(job))
        text = (f"❌ decode-bot gave up on this after {job.attempts} attempts: the worker stopped each time "
                f"(crash, restart or out of memory). Comment again to retry.\n\n{tag}")
        existing = forge.find_comment(trigger.repo, trigger.number, tag)
        if existing is None:
            forge.post_comment(trigger.repo, trigger.number, text, tag)
        else:
            forge.edit_comment(trigger.repo, existing, text)

    return report
