"""How fast decode-bot writes to GitHub: within its secondary limit on content-creating requests, whatever
the number of jobs.

GitHub allows "no more than 80 content-generating requests per minute and no more than 500 per hour"
and answers more with a 403 or 429 and `retry-after`
(https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits).
A `WritePacer` (the `GitHubForge` holds it) counts every write (POST, PATCH, PUT, DELETE) per account (the
repository's owner: an App's installation) in sliding windows, and makes a write wait while the windows are
full. The writes are counted in a `Ledger`: the job store where there is one (`decode serve`, `decode
worker`: every process and host on the store shares one count per account, each write taken atomically in
a transaction under the store's lock on that account), else the process's memory (the Action, the CLI). When GitHub has asked to slow down (a secondary limit answered), writes for that
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol

log = logging.getLogger(__name__)

LIMITS = ((80, 60.0), (500, 3600.0))  # (writes, seconds): GitHub's secondary limits on content creation
SLOW_FOR_S = 600.0  # after GitHub asked to slow down, writes go one a second for this long
OPTIONAL_SHARE = 0.5
MARGIN_S = 1.0  # a write counts this much longer than GitHub counts it: it arrives there later than it left

# decide(the account's writes within the horizon, oldest first; paused until; slow until; now) -> seconds to wait
Decide = Callable[[Sequence[float], float, float, float], float]


class Ledger(Protocol):
    """Where an account's writes and GitHub's requests to wait are kept: one process's memory, or the job
    store shared by every process on it (`bot.jobs.sqlite.Store`, `bot.jobs.postgres.PostgresStore`)."""

    def take_write(self, account: str, horizon_s: float, decide: Decide) -> float:
        """Atomically among everyone sharing the ledger: `decide` over `account`'s writes of the last `horizon_s`
        (older ones are forgotten), its pause and its slow period, at the ledger's clock; a write is recorded
        when it answers 0 or less. Returns its answer."""
        ...

    def hold_writes(self, account: str, wait_s: float, slow_s: float) -> None:
        """No write of `account` for `wait_s` from now (a later time already held stays); then they go one a
        second for `slow_s`."""
        ...


@dataclass
class _Account:
    """One account's recent writes, and the times GitHub named."""

    writes: list[float] = field(default_factory=list)
    paused_until: float = 0.0
    slow_until: float = 0.0


class LocalLedger:
    """A `Ledger` in this process's memory, on `clock`: where there is no job store."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._accounts: dict[str, _Account] = {}
        self._lock = threading.Lock()

    def take_write(self, account: str, horizon_s: float, decide: Decide) -> float:
        with self._lock:
            state, now = self._accounts.setdefault(account, _Account()), self.clock()
            state.writes = [t for t in state.writes if t > now - horizon_s]
            wait = decide(state.writes, state.paused_until, state.slow_until, now)
            if wait <= 0:
                state.writes.append(now)
            return wait

    def hold_writes(self, account: str, wait_s: float, slow_s: float) -> None:
        with self._lock:
            state, now = self._accounts.setdefault(account, _Account()), self.clock()
            state.paused_until = max(state.paused_until, now + wait_s)
            state.slow_until = state.paused_until + slow_s


class WritePacer:
    """Writes per account within `limits`, counted in `ledger` (default: this process's, on `clock`); `clock`
    and `sleep` are injectable for tests."""

    @classmethod
    def per_minute(cls, writes: int, *, ledger: Ledger | None = None) -> "WritePacer":
        """The pacer of a process whose settings allow `writes` a minute (and 6.25 times that an hour, as
        GitHub's 80 and 500); 0 paces nothing. With `ledger` (the job store) every process on it shares them."""
        return cls(((writes, 60.0), (writes * 25 // 4, 3600.0)) if writes else (), ledger=ledger)

    def __init__(self, limits: tuple[tuple[int, float], ...] = LIMITS, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep, ledger: Ledger | None = None) -> None:
        self.limits, self.sleep = limits, sleep
        self.ledger = ledger if ledger is not None else LocalLedger(clock)
        self.horizon_s = max((seconds for _, seconds in limits), default=0.0) + MARGIN_S
        self.waited_s = 0.0  # in total, for the figures and tests

    def acquire(self, account: str) -> None:
        """Wait until `account` may write, and count the write."""
        while (wait := self.ledger.take_write(account.lower(), self.horizon_s, partial(self._wait, share=1.0))) > 0:
            self.waited_s += wait
            self.sleep(wait)

    def may_write(self, account: str) -> bool:
        """Whether a write that may be skipped goes now (then it is counted): only within `OPTIONAL_SHARE` of
        each window, and never while GitHub asked to wait or to slow down."""
        return self.ledger.take_write(account.lower(), self.horizon_s, self._optional) <= 0

    def asked(self, account: str, wait_s: float, why: str) -> None:
        """GitHub refused a write of `account` for `why` and asked to wait `wait_s`: no write of that account
        goes before then, and they go one a second for `SLOW_FOR_S` after."""
        self.ledger.hold_writes(account.lower(), wait_s, SLOW_FOR_S)
        log.warning("GitHub's %s for %s: its writes wait %.0f s as GitHub asks, then go one a second for %.0f min",
                    why, account, wait_s, SLOW_FOR_S / 60)

    def _optional(self, writes: Sequence[float], paused_until: float, slow_until: float, now: float) -> float:
        if now < slow_until:
            return slow_until - now
        return self._wait(writes, paused_until, slow_until, now, share=OPTIONAL_SHARE)

    def _wait(self, writes: Sequence[float], paused_until: float, slow_until: float, now: float, *,
              share: float) -> float:
        """Seconds before an account with these `writes` may write with `share` of each window (0: now)."""
        wait = paused_until - now
        if now < slow_until and writes:
            wait = max(wait, writes[-1] + 1.0 - now)
        for count, seconds in self.limits:
            allowed = max(int(count * share), 1)
            recent = [t for t in writes if t > now - seconds - MARGIN_S]
            if len(recent) >= allowed:
                wait = max(wait, recent[-allowed] + seconds + MARGIN_S - now)
        return wait
