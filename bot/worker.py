"""A pool of threads that claim jobs from the `Store` and run them.

Each thread loops: claim a job, run `handle(job)`, record the result (done) or
the exception (failed). A heartbeat thread extends the lease of every running
job every `lease_s / 3`; a job whose worker died is claimed again by any pool
on the same store once its lease expires, and one that died `max_attempts`
times is handed to `on_exhausted` to be reported. `stop` is the graceful
shutdown: no new claims, running jobs get `grace_s` to finish, the rest are
released to be claimed again by the next worker.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from bot.store import JobRecord, Store, StoreError

log = logging.getLogger(__name__)

Handler = Callable[[JobRecord], dict]
_numbers = itertools.count(1)


def worker_id() -> str:
    """A worker id unique to this host, process and call: `hostname:pid:n`."""
    return f"{socket.gethostname()}:{os.getpid()}:{next(_numbers)}"


@dataclass
class _Running:
    job: JobRecord
    worker: str


class WorkerPool:
    """`size` threads running jobs from `store` with `handle(job) -> result`."""

    def __init__(self, store: Store, handle: Handler, *, size: int = 4, poll_s: float = 0.5,
                 name: str = "worker", on_exhausted: Callable[[JobRecord], None] | None = None) -> None:
        if size < 1:
            raise ValueError(f"a worker pool needs at least one thread, not {size}")
        self.store = store
        self.handle = handle
        self.size = size
        self.poll_s = poll_s
        self.name = name
        self.on_exhausted = on_exhausted
        self._stopping = threading.Event()
        self._halt = threading.Event()  # heartbeats go on until the running jobs are finished or released
        self._stopped = threading.Event()
        self._running: dict[int, _Running] = {}  # job id -> what a thread is running now
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._service: list[threading.Thread] = []
        self._signals = 0

    # -- lifecycle --------------------------------------------------------

    def start(self) -> None:
        """Start the worker threads, the heartbeat and the reaper of exhausted jobs."""
        if self._threads:
            raise RuntimeError("this worker pool was already started")
        for n in range(self.size):
            thread = threading.Thread(target=self._work, args=(worker_id(),), name=f"{self.name}-{n}", daemon=True)
            self._threads.append(thread)
        self._service = [
            threading.Thread(target=self._heartbeats, name=f"{self.name}-heartbeat", daemon=True),
            threading.Thread(target=self._reap, args=(worker_id(),), name=f"{self.name}-reaper", daemon=True),
        ]
        for thread in self._threads + self._service:
            thread.start()
        log.info("%s pool started: %d threads on %s", self.name, self.size, self.store.path)

    def stop(self, grace_s: float = 30.0) -> list[int]:
        """Stop claiming, give running jobs `grace_s` to finish, release the rest; return their ids.

        A released job is queued again without counting the attempt. Its thread
        may still be running (the threads are daemons; the process is about to
        exit); whatever it finishes with is discarded, since it no longer holds the lease.
        """
        with self._lock:
            self._stopping.set()
        deadline = time.monotonic() + grace_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            left = list(self._running.values())
            self._running.clear()
        released = []
        for running in left:
            try:
                self.store.release(running.job.id, running.worker)
                released.append(running.job.id)
                log.warning("job %d released at shutdown after %.0f s of grace: it will run again",
                            running.job.id, grace_s, extra={"job_id": running.job.id})
            except StoreError as e:
                log.error("job %d could not be released (%s): it will run again when its lease expires",
                          running.job.id, e, extra={"job_id": running.job.id})
        self._halt.set()
        for thread in self._service:
            thread.join(self.poll_s + 1.0)
        self._stopped.set()
        log.info("%s pool stopped", self.name)
        return released

    def wait_stopped(self, timeout: float | None = None) -> bool:
        """Block until `stop` has completed (e.g. from a signal); False on timeout."""
        return self._stopped.wait(timeout)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until the store holds no queued or running job and this pool runs none; False on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            counts = self.store.counts()
            with self._lock:
                busy = bool(self._running)
            if not busy and counts["queued"] == 0 and counts["running"] == 0:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)

    def install_signal_handlers(self, grace_s: float = 30.0, *,
                                on_stopped: Callable[[], None] | None = None) -> None:
        """Make SIGTERM and SIGINT stop the pool gracefully, then call `on_stopped` (e.g. stop serving).

        The stop runs on its own thread, so the signal handler returns at once; a
        second signal exits the process immediately (its jobs run again after their
        leases expire). Call this from the main thread.
        """
        def stop_then_notify() -> None:
            self.stop(grace_s)
            if on_stopped is not None:
                on_stopped()

        def on_signal(signum: int, frame: object) -> None:
            self._signals += 1
            if self._signals > 1:
                log.warning("second %s: exiting without waiting for running jobs", signal.Signals(signum).name)
                os._exit(128 + signum)
            log.info("%s: stopping, running jobs get %.0f s to finish", signal.Signals(signum).name, grace_s)
            threading.Thread(target=stop_then_notify, name=f"{self.name}-stop", daemon=True).start()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)

    # -- threads ----------------------------------------------------------

    def _work(self, worker: str) -> None:
        while not self._stopping.is_set():
            try:
                job = self.store.claim(worker)
            except StoreError as e:
                log.error("%s could not claim a job: %s", worker, e)
                self._stopping.wait(self.poll_s)
                continue
            if job is None:
                self._stopping.wait(self.poll_s)
                continue
            with self._lock:  # either stop() sees this job as running, or we see stop() began
                stopping = self._stopping.is_set()
                if not stopping:
                    self._running[job.id] = _Running(job, worker)
            if stopping:  # claimed while stop began: hand it straight back
                try:
                    self.store.release(job.id, worker)
                except StoreError as e:
                    log.error("job %d could not be released (%s): it will run again when its lease expires",
                              job.id, e, extra={"job_id": job.id})
                return
            self._run(job, worker)

    def _run(self, job: JobRecord, worker: str) -> None:
        ids = {"job_id": job.id, "delivery_id": job.delivery_id}
        log.info("job %d (%s) started by %s, attempt %d", job.id, job.key, worker, job.attempts, extra=ids)
        started = time.monotonic()
        try:
            try:
                result = self.handle(job)
                json.dumps(result)
            except Exception as e:
                log.exception("job %d failed: %s", job.id, e, extra=ids)
                state, result, error = "failed", None, str(e) or type(e).__name__
            except BaseException as e:  # e.g. `Cancelled`: its sandbox was closed under it after its release
                with self._lock:
                    released = job.id not in self._running
                if not released:
                    raise
                log.info("job %d stopped after it was released: %s", job.id, e, extra=ids)
                return
            else:
                state, error = "done", None
            with self._lock:
                if self._running.pop(job.id, None) is None:
                    log.warning("job %d ended after it was released; its %s outcome is discarded",
                                job.id, state, extra=ids)
                    return
            if self.store.finish(job.id, worker, state, result=result, error=error):
                log.info("job %d %s in %.1f s", job.id, state, time.monotonic() - started, extra=ids)
            else:
                log.warning("job %d ended %s but its lease was lost (another worker took it over); "
                            "outcome discarded", job.id, state, extra=ids)
        except StoreError as e:
            log.error("job %d: could not record its outcome (%s); it will run again when its lease expires",
                      job.id, e, extra=ids)
        finally:
            with self._lock:
                self._running.pop(job.id, None)

    def _heartbeats(self) -> None:
        interval = self.store.lease_s / 3
        while not self._halt.wait(interval):
            for running in self._running_now():
                ids = {"job_id": running.job.id, "delivery_id": running.job.delivery_id}
                try:
                    lost = not self.store.heartbeat(running.job.id, running.worker)
                    if lost and running.job.id in {r.job.id for r in self._running_now()}:  # not just finished
                        log.warning("job %d lost its lease; another worker may run it", running.job.id, extra=ids)
                except StoreError as e:
                    log.error("job %d: heartbeat failed: %s", running.job.id, e, extra=ids)

    def _running_now(self) -> list[_Running]:
        with self._lock:
            return list(self._running.values())

    def _reap(self, worker: str) -> None:
        interval = max(self.poll_s, min(self.store.lease_s / 3, 10.0))
        while not self._stopping.wait(interval):
            try:
                exhausted = self.store.take_exhausted(worker)
            except StoreError as e:
                log.error("could not look for exhausted jobs: %s", e)
                continue
            for job in exhausted:
                ids = {"job_id": job.id, "delivery_id": job.delivery_id}
                log.error("job %d (%s) failed: %s", job.id, job.key, job.error, extra=ids)
                if self.on_exhausted is None:
                    continue
                try:
                    self.on_exhausted(job)
                except Exception:
                    log.exception("job %d: reporting its failure failed", job.id, extra=ids)
