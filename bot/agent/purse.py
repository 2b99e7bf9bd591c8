"""One cost cap shared by runs that go on at once: a best-of-N run's attempts (bot/run/attempts.py) spend from one
`Purse` holding `DECODE_MAX_COST_USD`, each model turn's cost counted in it as it is paid, so the whole run, not
each attempt, stays within the cap. A run's own `Budget.max_cost_usd` still applies to it alone.
"""

from __future__ import annotations

import threading


class Purse:
    """`cap_usd` to spend, from several threads: `spend` counts a turn's cost, `spent_out` says the cap is
    reached (a run checks it before each turn, as it checks its own cost cap)."""

    def __init__(self, cap_usd: float) -> None:
        self.cap_usd = cap_usd
        self._spent = 0.0
        self._lock = threading.Lock()

    def spend(self, usd: float) -> None:
        """Count `usd` as paid."""
        with self._lock:
            self._spent += usd

    @property
    def spent(self) -> float:
        """What has been paid so far, by every run that spends from it."""
        with self._lock:
            return self._spent

    def spent_out(self) -> bool:
        """Whether the cap is reached: no run sharing it may start another turn."""
        return self.spent >= self.cap_usd
