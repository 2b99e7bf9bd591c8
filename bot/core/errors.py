"""The one root exception of decode-bot.

Every error a user can see is a `DecodeError` whose message says what to fix.
Structured fields (HTTP status, exit code, stderr) travel with it so callers can
report without parsing text.
"""

from __future__ import annotations


class DecodeError(Exception):
    """An error with a message meant for the person running the bot."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        exit_code: int | None = None,
        stderr: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.exit_code = exit_code
        self.stderr = stderr

    def __str__(self) -> str:
        return self.message


class ConfigError(DecodeError):
    """A setting is missing or malformed; the message names the variable or key."""


class RateLimited(DecodeError):
    """GitHub's rate limit held a write back longer than the retry policy waits: the work is not done another
    way (an unsigned push), it waits for a later attempt."""


class SandboxError(DecodeError):
    """The sandbox itself failed (could not start, died); not a failed command."""


class Interrupted(DecodeError):
    """Ctrl-C or SIGTERM came before there was work to keep (or while it was being kept)."""


class Cancelled(BaseException):
    """The process is stopping and took the sandbox away from a job it released (see `close_all`).

    Not a failure to report: the job runs again elsewhere. A `BaseException`, so the handlers that
    turn every `Exception` into a failed run and a comment let it pass.
    """
