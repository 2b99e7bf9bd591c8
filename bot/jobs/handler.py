"""What running a queued job means: the GitHub job of its work, and the report of one given up on.

Every runner uses these: the worker threads of `decode serve` and `decode
worker`, and the `run_job` function call of the Modal app. A finished job's
`RunResult` (bot/run/result.py: `Conclusion.recorded`) is what the store keeps
and what the run's record.json holds; a run's result goes to `record`, which is
how its figures reach /metrics (`Metrics.record_run`); on Modal the result is
the call's return value, and the control app records it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from bot.config import JobParts
from bot.core.names import run_id, run_tag
from bot.github.forge import Forge
from bot.github.conclusion import marker
from bot.github.job import JobContext, run_github_job
from bot.github.labels import add_trigger_labels
from bot.jobs.lease import Outcome
from bot.model import Model
from bot.run.result import RunResult
from bot.jobs.store import JobRecord
from bot.github.work import Labels, work_of

log = logging.getLogger("decode.worker")


Record = Callable[[RunResult], None]


def tag_of(job: JobRecord) -> str:
    """The run tag of a stored job: its store's id with its run id, so that a job of a new store (whose ids
    start again at 1) never finds the comments of an older store's job of the same number."""
    return run_tag(job.store_id, run_id(job.id))


def outcome_of(result: RunResult) -> Outcome:
    """The lease outcome of a job's result: failed with its one-line error (deferred, when it may succeed
    later), or done; the store keeps the result as JSON."""
    if result.state == "failed":
        return Outcome(result=result.to_json(), error=result.error or "failed", retry_later=result.retry_later)
    return Outcome(result=result.to_json())


def job_handler(parts: JobParts, forge: Forge, record: Record | None = None, *,
                model: Model | None = None) -> Callable[[JobRecord], Outcome]:
    """What a runner does with a claimed job: the GitHub job with the settings' `parts`, its result to `record`
    (when an agent ran), logs keyed by job id; `model` is the process's shared model (`bot.model.shared_model`),
    None to make one per run.

    Returns the outcome to store: the job's `RunResult`, failed when the job failed.
    """

    def handle(job: JobRecord) -> Outcome:
        work = work_of(job.payload)
        extra = {"job_id": job.id, "delivery_id": job.delivery_id}
        log.info("job %s: %s on %s#%s (attempt %d)", job.id, work.kind, work.repo, work.number,
                 job.attempts, extra=extra)
        if isinstance(work, Labels):
            conclusion = add_trigger_labels(work, forge, parts.github.trigger_label)
        else:
            conclusion = run_github_job(JobContext(work, forge, run_id(job.id), tag_of(job),
                                                   attempt=job.attempts, model=model,
                                                   progress=lambda line: log.info(line, extra=extra)), parts)
        result = conclusion.recorded(run_id(job.id))  # record.json holds what the store does, links included
        if record is not None and result.figures is not None:
            record(result)
        why = (conclusion.message.splitlines() or [""])[0] if conclusion.state in ("skipped", "failed") else ""
        level = logging.INFO if conclusion.state != "failed" else logging.WARNING if result.retry_later else \
            logging.ERROR  # a job that may run again later: the runner says whether it will
        log.log(level, "job %s: %s%s", job.id,
                conclusion.state, f": {why}" if why else f" {result.pr_url or ''}", extra=extra)
        return outcome_of(result)

    return handle


def exhausted_reporter(forge: Forge) -> Callable[[JobRecord], None]:
    """Tell the issue that a job was given up on after its worker died on every attempt."""

    def report(job: JobRecord) -> None:
        work = work_of(job.payload)
        log.error("job %s: %s", job.id, job.error, extra={"job_id": job.id})
        if work.number is None:
            return
        tag = marker("run", tag_of(job))
        text = (f"❌ decode-bot gave up on this after {job.attempts} attempts: the worker stopped each time "
                f"(crash, restart or out of memory). Comment again to retry.\n\n{tag}")
        existing = forge.find_comment(work.repo, work.number, tag)
        if existing is None:
            forge.post_comment(work.repo, work.number, text, tag)
        else:
            forge.edit_comment(work.repo, existing, text)

    return report
