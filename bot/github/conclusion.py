"""How a job ended: the one value the webhook worker, the Modal app, the Action and the CLI all read.

A `Conclusion` carries the state, the message for the tracking comment, the links, the run's
outcome and the error; `record()` is what the job store keeps and a Modal function call returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.core.errors import ConfigError
from bot.run.pipeline import Outcome


@dataclass
class Conclusion:
    """How a job ended: the one value the webhook worker, the Modal app, the Action and the CLI all read."""

    state: str  # success | incomplete | no_changes | failed | skipped
    message: str = ""
    pr_url: str | None = None
    branch: str | None = None
    outcome: Outcome | None = None
    error: Exception | None = None  # why it failed before or around the run (a ConfigError: input to fix)

    @property
    def exit_code(self) -> int:
        """0 done, nothing to change or skipped; 1 failed; 2 a setting or input to fix; 3 stopped by a
        budget cap; 130 interrupted. The one table the CLI and the Action share."""
        if self.state == "failed":
            return 2 if isinstance(self.error, ConfigError) else 1
        if self.outcome is not None and self.outcome.result.stop_reason == "interrupted":
            return self.outcome.result.exit_code
        return 3 if self.state == "incomplete" else 0

    def record(self) -> dict[str, Any]:
        """The conclusion as the job store keeps it (and a Modal function call returns it): JSON, no secret
        (`message` is redacted where it is made), the verification result (`passed`, `failed`, `none`), the
        figures of the run when the agent ran."""
        figures = None
        if self.outcome is not None:
            r = self.outcome.result
            figures = {"turns": r.turns, "seconds": r.wall_s, "cost_usd": r.cost_usd, "tokens": {
                "input": r.usage.input_tokens, "output": r.usage.output_tokens,
                "cache_read": r.usage.cache_read_tokens, "cache_write": r.usage.cache_creation_tokens}}
        error = (self.message or "failed").splitlines()[0].removeprefix("❌ ") if self.state == "failed" else None
        verified = self.outcome.verification.verified if self.outcome is not None else "none"
        return {"state": self.state, "exit_code": self.exit_code, "error": error, "pr_url": self.pr_url,
                "branch": self.branch, "verified": verified, "figures": figures}


def marker(kind: str, key: object) -> str:
    """A hidden tag that lets a retried job find the comment it already posted."""
    return f"<!-- decode-bot:{kind}:{key} -->"
