"""How a job ended: what the webhook worker, the Modal app, the Action and the CLI read of a job.

A `Conclusion` carries the state, the message for the tracking comment, the links, the finished run (`Ran`:
its `RunResult` and what publishing used) and the error. `result()` is the job's `RunResult` with the
state and links publishing settled (bot/run/result.py): what the job store keeps, record.json holds and a
Modal function call returns.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from bot.core.errors import ConfigError
from bot.run.pipeline import Ran
from bot.run.result import RunResult, write_record


@dataclass(frozen=True)
class Conclusion:
    """How a job ended: the one value the webhook worker, the Modal app, the Action and the CLI all read."""

    state: str  # success | incomplete | no_changes | failed | skipped
    message: str = ""
    pr_url: str | None = None
    branch: str | None = None
    ran: Ran | None = None
    error: Exception | None = None  # why it failed before or around the run (a ConfigError: input to fix)

    @property
    def exit_code(self) -> int:
        """0 done, nothing to change or skipped; 1 failed; 2 a setting or input to fix; 3 stopped by a
        budget cap; 130 interrupted. The one table the CLI and the Action share."""
        if self.state == "failed":
            return 2 if isinstance(self.error, ConfigError) else 1
        if self.ran is not None and self.ran.result.stop_reason == "interrupted":
            return self.ran.result.exit_code
        return 3 if self.state == "incomplete" else 0

    def result(self, run_id: str) -> RunResult:
        """The job's result: the run's, with this conclusion's state, links, exit code and one-line error
        (`message` is redacted where it is made); a result without figures when no agent ran."""
        error = (self.message or "failed").splitlines()[0].removeprefix("❌ ") if self.state == "failed" else None
        run = self.ran.result if self.ran is not None else RunResult(run_id=run_id, state=self.state)
        return replace(run, state=self.state, pr_url=self.pr_url, branch=self.branch, error=error,
                       exit_code=self.exit_code)

    def recorded(self, run_id: str) -> RunResult:
        """`result(run_id)`, also written to the run's record.json when a run took place: what `decode runs`,
        the dashboard and the Action's artifact read (the pull request, and the commit as published), whatever
        the door."""
        result = self.result(run_id)
        if self.ran is not None:
            write_record(self.ran.run_dir, result)
        return result


def marker(kind: str, key: object) -> str:
    """A hidden tag that lets a retried job find the comment it already posted: `key` is a run tag
    (`core.names.run_tag`) or a GitHub id, so no other run's comment has it (docs/github.md, Markers)."""
    return f"<!-- decode-bot:{kind}:{key} -->"
