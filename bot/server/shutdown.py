"""How `decode serve` and `decode worker` answer SIGTERM, SIGINT and SIGUSR1: the process's signals, in one place.

The first signal starts the graceful stop on a thread of its own, so the handler returns at once: no new
claims, running jobs get their grace period, the rest are released to run again (`LeaseRunner.stop`). A
second signal ends the process at once (the kernel's default action for it); the jobs it still ran run again once
their leases expire.
SIGUSR1 writes every thread's stack to stderr (the log) and changes nothing else: how an operator sees where a
server that stopped making progress waits. A stack holds file, line and function names only, never a value.
The runner itself knows nothing of signals: the Modal control app stops its runner its own way.
"""

from __future__ import annotations

import faulthandler
import logging
import signal
import threading
from collections.abc import Callable

log = logging.getLogger("decode.worker")


class Signalled:
    """The first stopping signal `on_shutdown` saw, for the process's exit status."""

    def __init__(self) -> None:
        self.name: str | None = None

    @property
    def exit_code(self) -> int:
        """130 after SIGINT (Ctrl-C: interrupted, as every door says), 0 after SIGTERM (the ordinary stop of a
        service) or without a signal."""
        return 130 if self.name == "SIGINT" else 0


def on_shutdown(stop: Callable[[str], None]) -> Signalled:
    """Make SIGTERM and SIGINT call `stop(the signal's name)` on a thread of its own; a second signal ends
    the process immediately; SIGUSR1 dumps every thread's stack to stderr. Call from the main thread; the answer
    names the first signal once it came.

    The first signal hands both signals back to the kernel's default, so the second one kills the process
    whatever its main thread is doing: a Python handler would run only once the main thread next runs
    Python, and one that arrives while the first handler runs is not seen until a blocking call wakes."""

    signalled = Signalled()

    def on_signal(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        name = signalled.name = signal.Signals(signum).name
        log.info("%s: stopping; a second SIGTERM or SIGINT ends the process without waiting for running jobs", name)
        threading.Thread(target=stop, args=(name,), name="shutdown", daemon=True).start()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    return signalled
