"""How fast decode-bot writes to GitHub: within its secondary limit on content-creating requests, whatever
the number of jobs.

GitHub allows "no more than 80 content-generating requests per minute and no more than 500 per hour"
and answers more with a 403 or 429 and `retry-after`
(https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits).
One `WritePacer` per process (the `GitHubForge` holds it) counts every write (POST, PATCH, PUT, DELETE) per
account (the repository's owner: an App's installation) in sliding windows, and makes a write wait while
the windows are full. When GitHub has asked to slow down (a secondary limit answered), writes for that
account wait until the time it named, then go one a second ("wait at least one second between each
request", https://docs.github.com/en/rest/using-the-rest-api/best-practices-for-using-the-rest-api) for
`SLOW_FOR_S`; otherwise there is no fixed pacing, so a publish of a few requests is not slowed down.

A write that may be skipped (a progress edit of the tracking comment) asks `may_write` instead of waiting:
it goes only while its account has used less than `OPTIONAL_SHARE` of each window, so many jobs' progress
never takes the budget that their comments, commits and pull requests need.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

LIMITS = ((80, 60.0), (500, 3600.0))  # (writes, seconds): GitHub's secondary limits on content creation
SLOW_FOR_S = 600.0  # after GitHub asked to slow down, writes go one a second for this long
OPTIONAL_SHARE = 0.5
MARGIN_S = 1.0  # a write counts this much longer than GitHub counts it: it arrives there later than it left


@dataclass
class _Account:
    """One account's recent writes, and the times GitHub named."""

    writes: deque[float] = field(default_factory=deque)
    paused_until: float = 0.0
    slow_until: float = 0.0


class WritePacer:
    """Writes per account within `limits`; `clock` and `sleep` are injectable for tests."""

    @classmethod
    def per_minute(cls, writes: int) -> "WritePacer":
        """The pacer of a process whose settings allow `writes` a minute (and 6.25 times that an hour, as
        GitHub's 80 and 500); 0 paces nothing."""
        return cls(((writes, 60.0), (writes * 25 // 4, 3600.0)) if writes else ())

    def __init__(self, limits: tuple[tuple[int, float], ...] = LIMITS, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.limits, self.clock, self.sleep = limits, clock, sleep
        self._accounts: dict[str, _Account] = {}
        self._lock = threading.Lock()
        self.waited_s = 0.0  # in total, for the figures and tests

    def acquire(self, account: str) -> None:
        """Wait until `account` may write, and count the write."""
        while True:
            with self._lock:
                wait = self._wait(self._account(account), share=1.0)
                if wait <= 0:
                    self._account(account).writes.append(self.clock())
                    return
            self.waited_s += wait
            self.sleep(wait)

    def may_write(self, account: str) -> bool:
        """Whether a write that may be skipped goes now (then it is counted): only within `OPTIONAL_SHARE` of
        each window, and never while GitHub asked to wait or to slow down."""
        with self._lock:
            state = self._account(account)
            if self._wait(state, share=OPTIONAL_SHARE) > 0 or self.clock() < state.slow_until:
                return False
            state.writes.append(self.clock())
            return True

    def asked(self, account: str, wait_s: float, why: str) -> None:
        """GitHub refused a write of `account` for `why` and asked to wait `wait_s`: no write of that account
        goes before then, and they go one a second for `SLOW_FOR_S` after."""
        with self._lock:
            state = self._account(account)
            now = self.clock()
            state.paused_until = max(state.paused_until, now + wait_s)
            state.slow_until = state.paused_until + SLOW_FOR_S
        log.warning("GitHub's %s for %s: its writes wait %.0f s as GitHub asks, then go one a second for %.0f min",
                    why, account, wait_s, SLOW_FOR_S / 60)

    def _account(self, account: str) -> _Account:
        return self._accounts.setdefault(account.lower(), _Account())

    def _wait(self, state: _Account, *, share: float) -> float:
        """Seconds before `state` may write with `share` of each window (0: now); old writes are dropped."""
        now = self.clock()
        longest = max((seconds for _, seconds in self.limits), default=0.0) + MARGIN_S
        while state.writes and state.writes[0] <= now - longest:
            state.writes.popleft()
        wait = state.paused_until - now
        if now < state.slow_until and state.writes:
            wait = max(wait, state.writes[-1] + 1.0 - now)
        for count, seconds in self.limits:
            allowed = max(int(count * share), 1)
            recent = [t for t in state.writes if t > now - seconds - MARGIN_S]
            if len(recent) >= allowed:
                wait = max(wait, recent[-allowed] + seconds + MARGIN_S - now)
        return wait
