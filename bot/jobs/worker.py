"""The thread executor of the lease runner: each claimed job runs `handle(job)` on a thread of its own.

`decode serve` and `decode worker` run jobs this way (bot/jobs/lease.py holds the
lease protocol). The handler's `Outcome` is the job's; an exception is the
job's failure. A job released at shutdown keeps its thread (a daemon: the
process is about to exit): what it ends with is discarded, and a
`BaseException` it ends with (e.g. `Cancelled`, its sandbox closed under it) is
logged, not raised.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable

from bot.jobs.lease import Outcome, RunLost, ids_of
from bot.jobs.store import JobRecord

log = logging.getLogger(__name__)

Handler = Callable[[JobRecord], Outcome]


class ThreadRun:
    """`handle(job)` running on a daemon thread; a `Run`."""

    def __init__(self, job: JobRecord, handle: Handler, name: str) -> None:
        self.job = job
        self._handle = handle
        self._outcome: Outcome | None = None
        self._abandoned = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def poll(self) -> Outcome | None:
        if self._outcome is None and self._thread.is_alive():
            return None
        if self._outcome is None:
            raise RunLost(f"thread {self._thread.name} ended without an outcome")
        return self._outcome

    def abandon(self) -> None:
        self._abandoned.set()

    def _run(self) -> None:
        job, ids = self.job, ids_of(self.job)
        try:
            try:
                outcome = self._handle(job)
            except Exception as e:
                log.exception("job %d failed: %s", job.id, e, extra=ids)
                outcome = Outcome(error=str(e) or type(e).__name__)
        except BaseException as e:  # e.g. `Cancelled`: its sandbox was closed under it after its release
            if not self._abandoned.is_set():
                raise  # the run is lost: the job's lease expires and it runs again
            log.info("job %d stopped after it was released: %s", job.id, e, extra=ids)
            return
        if self._abandoned.is_set():
            log.warning("job %d ended after it was released; its outcome is discarded", job.id, extra=ids)
            return
        self._outcome = outcome


class ThreadExecutor:
    """Starts each job as a `ThreadRun` of `handle`; an `Executor`."""

    def __init__(self, handle: Handler, name: str = "worker") -> None:
        self.handle = handle
        self.name = name
        self._numbers = itertools.count()

    def start(self, job: JobRecord) -> ThreadRun:
        return ThreadRun(job, self.handle, f"{self.name}-{next(self._numbers)}")
