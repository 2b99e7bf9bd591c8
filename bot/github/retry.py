"""The one retry policy for GitHub's REST API.

Retried: 5xx, lost connections and timeouts, and rate limits, which GitHub
answers with 429 or with 403 plus `Retry-After` (secondary limits) or
`x-ratelimit-remaining: 0` and `x-ratelimit-reset` (primary limits); see
https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api#exceeding-the-rate-limit
Any other 4xx is a logic error and is raised at once; no connection at all (a
refused connection, DNS, a connect timeout) is tried only `unreachable_attempts`
times, briefly. An answer that is late (a read timeout) comes from a GitHub that
was reached and is slow, and gets every attempt with the backoff, like a 5xx.
A wait GitHub names is waited out whole (up to `MAX_ASKED_S`) and said in
the log: trying earlier is refused again and counts against the integration.
PyGithub's own retry is turned off so that this is the only policy.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

import requests
from github import GithubException
from tenacity import RetryCallState, Retrying, retry_if_exception, wait_exponential_jitter

log = logging.getLogger(__name__)
T = TypeVar("T")
MAX_WAIT_S = 120.0  # our own backoff between attempts
MAX_ASKED_S = 3900.0  # a wait GitHub names: a primary limit resets within the hour


def is_transient(exc: BaseException) -> bool:
    """Whether a retry can help: server trouble, a lost connection, a rate limit."""
    if isinstance(exc, (requests.ConnectionError, requests.Timeout)):
        return True
    if not isinstance(exc, GithubException):
        return False
    if exc.status >= 500 or exc.status == 429:
        return True
    return exc.status == 403 and _rate_limited(exc)


def _rate_limited(exc: GithubException) -> bool:
    headers = {k.lower(): v for k, v in (exc.headers or {}).items()}
    message = str((exc.data or {}).get("message", "")) if isinstance(exc.data, dict) else ""
    return ("retry-after" in headers or headers.get("x-ratelimit-remaining") == "0"
            or "rate limit" in message.lower())


def unreachable(exc: BaseException | None) -> bool:
    """No connection at all (refused, DNS, a connect timeout, which requests counts as a ConnectionError too):
    retried briefly, since a wrong GITHUB_API_URL never heals. A read timeout is not one: GitHub was reached."""
    return isinstance(exc, requests.ConnectionError)


def rate_limit(exc: BaseException | None) -> str | None:
    """Which of GitHub's rate limits `exc` is ("secondary rate limit", "primary rate limit"), or None."""
    if not isinstance(exc, GithubException) or not (exc.status == 429 or exc.status == 403 and _rate_limited(exc)):
        return None
    headers = {k.lower(): v for k, v in (exc.headers or {}).items()}
    return "primary rate limit" if headers.get("x-ratelimit-remaining") == "0" else "secondary rate limit"


def requested_wait(exc: BaseException | None, now: float | None = None) -> float | None:
    """Seconds GitHub asked us to wait (`Retry-After` or `x-ratelimit-reset`), if it did."""
    if not isinstance(exc, GithubException):
        return None
    headers = {k.lower(): v for k, v in (exc.headers or {}).items()}
    try:
        if "retry-after" in headers:
            return max(float(headers["retry-after"]), 0.0)
        if headers.get("x-ratelimit-remaining") == "0" and "x-ratelimit-reset" in headers:
            return max(float(headers["x-ratelimit-reset"]) - (now or time.time()), 0.0) + 1.0
    except ValueError:
        return None
    return None


class GitHubRetry:
    """Builds tenacity `Retrying` objects; `sleep` and the attempt count are injectable for tests."""

    def __init__(self, *, attempts: int = 6, sleep: Callable[[float], None] = time.sleep,
                 max_wait_s: float = MAX_WAIT_S, unreachable_attempts: int = 3,
                 max_asked_s: float = MAX_ASKED_S) -> None:
        self.attempts = attempts
        self.unreachable_attempts = min(unreachable_attempts, attempts)
        self.sleep = sleep
        self.max_wait_s = max_wait_s
        self.max_asked_s = max_asked_s
        self._backoff = wait_exponential_jitter(initial=1, max=30, jitter=1)

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if unreachable(exc):
            return 0.5 * state.attempt_number
        asked = requested_wait(exc)
        if asked is not None:
            return min(asked, self.max_asked_s)
        return min(self._backoff(state), self.max_wait_s)

    def _stop(self, state: RetryCallState) -> bool:
        exc = state.outcome.exception() if state.outcome else None
        limit = self.unreachable_attempts if unreachable(exc) else self.attempts
        return state.attempt_number >= limit

    def _log(self, state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        status = getattr(exc, "status", type(exc).__name__)
        limit = rate_limit(exc)
        said = f"GitHub answered {status} ({limit}); waiting {state.upcoming_sleep:.0f}s as it asks" if limit and \
            requested_wait(exc) is not None else f"GitHub answered {status}; retrying in {state.upcoming_sleep:.1f}s"
        log.warning("%s (attempt %d of %d)", said, state.attempt_number, self.attempts)

    def retrying(self) -> Retrying:
        return Retrying(
            retry=retry_if_exception(is_transient), stop=self._stop,
            wait=self._wait, sleep=self.sleep, before_sleep=self._log, reraise=True,
        )

    def call(self, fn: Callable[[], T]) -> T:
        """`fn()` under the policy; the last error is re-raised as is."""
        return self.retrying()(fn)
