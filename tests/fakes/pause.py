"""Holding a request at a chosen point, so a test can crash a server right there."""

from __future__ import annotations

import threading


class Pause:
    """Matching requests wait at the gate; `reached` is set when the first arrives.

    `release(drop=True)` (the default) lets them go without any effect: they get
    no answer, as if the network had died, which is what the client of a killed
    server would see anyway.
    """

    def __init__(self) -> None:
        self.reached = threading.Event()
        self._gate = threading.Event()
        self.drop = True
        self.active = True

    def hold(self, timeout: float = 120.0) -> bool:
        """Called by the fake when a matching request arrives; True when it must be dropped."""
        self.reached.set()
        self._gate.wait(timeout)
        return self.drop

    def release(self, drop: bool = True) -> None:
        self.drop = drop
        self.active = False
        self._gate.set()
