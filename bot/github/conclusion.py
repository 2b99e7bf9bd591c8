"""How a job ended: what the webhook worker, the Modal app, the Action and the CLI read of a job.

A `Conclusion` holds the job's `RunResult` (bot/run/result.py) and the message for the tracking comment,
with the finished run (`Ran`) when one took place. The run decides its state and exit status where it ends
(bot/run/pipeline.py); publishing adds the links and the commit GitHub has (`Conclusion.of_run`) and never
decides them again. A job that ended without a run (skipped, refused, a plan comment, labels), or whose
publishing failed, is `Conclusion.of_job`: the one other place a state is decided. The result is what the
job store keeps, record.json holds and a Modal function call returns.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from bot.core.errors import ConfigError
from bot.run.pipeline import Ran
from bot.run.result import RunResult, write_record


@dataclass(frozen=True)
class Conclusion:
    """How a job ended: the one value the webhook worker, the Modal app, the Action and the CLI all read.

    `result` is the job's result: its `state` (success | incomplete | no_changes | failed | skipped), links
    and `exit_code`; `ran.result` is that same value when a run took place."""

    result: RunResult
    message: str = ""  # redacted where it is made
    ran: Ran | None = None

    @classmethod
    def of_run(cls, ran: Ran, message: str, *, pr_url: str | None = None, branch: str | None = None) -> Conclusion:
        """A published run: its result as the run decided it, with where publishing put it (the pull request,
        the branch; `ran.result.commit` is the commit GitHub has)."""
        result = replace(ran.result, pr_url=pr_url, branch=branch)
        return cls(result, message, replace(ran, result=result))

    @classmethod
    def of_job(cls, state: str, message: str, *, ran: Ran | None = None, error: Exception | None = None,
               pr_url: str | None = None, branch: str | None = None, retry_later: bool = False) -> Conclusion:
        """A job that decided its own end: no run (skipped, refused, labels, an allow pull request), a plan
        run's answer, or a run whose publishing failed (`error`). A failed one exits 1, or 2 when `error` is a
        setting or input to fix, and its result's `error` is the message's first line; any other exits as its
        run did (0 without one). `retry_later`: it failed before it did anything, and may succeed later."""
        code = (2 if isinstance(error, ConfigError) else 1) if state == "failed" else \
            ran.result.exit_code if ran is not None else 0
        why = (message or "failed").splitlines()[0].removeprefix("❌ ") if state == "failed" else None
        if ran is None:
            return cls(RunResult(run_id="", state=state, pr_url=pr_url, branch=branch, error=why, exit_code=code,
                                 retry_later=retry_later), message)
        result = replace(ran.result, state=state, pr_url=pr_url, branch=branch, error=why, exit_code=code)
        return cls(result, message, replace(ran, result=result))

    @property
    def state(self) -> str:
        return self.result.state

    def recorded(self, run_id: str) -> RunResult:
        """The result, under `run_id` when no run named it, also written to the run's record.json when a run
        took place: what `decode runs`, the dashboard and the Action's artifact read (the pull request, and
        the commit as published), whatever the door."""
        if self.ran is None:
            return replace(self.result, run_id=run_id)
        write_record(self.ran.run_dir, self.result)
        return self.result


def marker(kind: str, key: object) -> str:
    """A hidden tag that lets a retried job find the comment it already posted: `key` is a run tag
    (`core.names.run_tag`) or a GitHub id, so no other run's comment has it (docs/github.md, Markers)."""
    return f"<!-- decode-bot:{kind}:{key} -->"
