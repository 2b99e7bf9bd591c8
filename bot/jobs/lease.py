"""The at-least-once lease protocol over the `JobStore`, once, for every way of running a job.

A `LeaseRunner` sweeps: it records the outcome of every run that ended, renews
the lease of every run still going (every `lease_s / 3`), hands the jobs whose
workers died `max_attempts` times to `on_exhausted`, and claims runnable jobs up
to `limit`, each started by its `Executor`: threads in this process for `decode
serve` and `decode worker` (bot/jobs/worker.py), Modal function calls for the Modal
control app (bot/modal_app.py). A run that dies without an outcome (`RunLost`)
keeps its lease until it expires, so the job is claimed again by any runner on
the store; one that did nothing and asks to run again later (`Outcome.retry_later`: GitHub did not
answer) is deferred the same way (`JobStore.defer`), for longer after each attempt. `stop` is the
graceful shutdown: no new claims, running jobs get `grace_s` to finish, the rest are released to be
claimed again by the next runner.
While `hold()` gives a reason (the model's key is rejected, say), the runner claims nothing: the
jobs wait in the store, unclaimed and with no attempt counted, and run once it gives none.

A run may outlive its runner: a Modal function call goes on when the container
that spawned it restarts. Such a run (`RemoteRun`) has a `call_id`, which the
runner records with the job (`JobStore.record_call`). Whoever claims the job next
asks its executor to `resume` that call before starting the job again: a call
that still runs is taken over (polled, its lease renewed), one that returned is
recorded, and only a call that is gone is started again, as a new attempt. So a
restarted dispatcher never runs a job twice at once.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol, runtime_checkable

from bot.jobs.store import JobRecord, JobStore, StoreError

log = logging.getLogger("bot.jobs.worker")
_numbers = itertools.count(1)


def worker_id() -> str:
    """A lease owner unique to this host, process and call: `hostname:pid:n`."""
    return f"{socket.gethostname()}:{os.getpid()}:{next(_numbers)}"


@dataclass(frozen=True)
class Outcome:
    """How a run ended: its `result` (the job's record, when it got that far), and `error`, the one-line
    text to record, when it failed. A failed run that says `retry_later` is deferred while it has attempts
    left (a lease after its first attempt, four times longer after each next), and failed with `error`
    after the last."""

    result: dict | None = None
    error: str | None = None
    retry_later: bool = False  # the run did nothing and may succeed later (GitHub did not answer): defer it


class RunLost(Exception):
    """A run ended without an outcome (its thread or function call died): the job's lease is left to expire."""


class Run(Protocol):
    def poll(self) -> Outcome | None:
        """The outcome once the run ended, None while it runs; `RunLost` if it died without one."""

    def abandon(self) -> None:
        """The job was released at shutdown: whatever the run still ends with is discarded."""


@runtime_checkable
class RemoteRun(Run, Protocol):
    """A run in a function call that outlives this process; `call_id` names the call."""

    call_id: str


class Executor(Protocol):
    def start(self, job: JobRecord) -> Run:
        """Start running `job`; an exception means it did not start (the job is released to try again)."""


@runtime_checkable
class Resumer(Executor, Protocol):
    def resume(self, job: JobRecord) -> Run | None:
        """The run of `job.call_id` when the call still runs or returned, None when it is gone; an exception
        means the call could not be asked (the job is released to ask again)."""


@dataclass
class _Leased:
    job: JobRecord
    owner: str
    run: Run
    started: float  # monotonic times
    renewed: float


def ids_of(job: JobRecord) -> dict[str, object]:
    """The log fields of a job."""
    return {"job_id": job.id, "delivery_id": job.delivery_id}


class LeaseRunner:
    """Runs the jobs of `store` with `executor`, at most `limit` at a time."""

    def __init__(self, store: JobStore, executor: Executor, *, limit: int = 4, poll_s: float = 0.5,
                 name: str = "worker", on_exhausted: Callable[[JobRecord], None] | None = None,
                 hold: Callable[[], object | None] | None = None) -> None:
        """`on_exhausted(job)` reports a job given up after `store.max_attempts` attempts; `hold()`, asked
        before each claim, is why no job should start now (None: claim); it must answer at once."""
        if limit < 1:
            raise ValueError(f"a lease runner needs to run at least one job at a time, not {limit}")
        self.store = store
        self.executor = executor
        self.limit = limit
        self.poll_s = poll_s
        self.name = name
        self.on_exhausted = on_exhausted
        self.hold = hold
        self.running: dict[int, _Leased] = {}  # job id -> its lease and run
        self._lock = threading.Lock()  # one sweep at a time; stop releases between sweeps
        self._stopping = threading.Event()
        self._halt = threading.Event()  # the sweeping thread ends
        self._nudge = threading.Event()  # sweep now: a job was queued in this process, or the runner halts
        self._stopped = threading.Event()
        self._reaped = float("-inf")
        self._thread: threading.Thread | None = None

    # -- one sweep --------------------------------------------------------

    def sweep(self) -> bool:
        """Record ended runs, renew the leases of running ones, report exhausted jobs, start runnable ones.

        Returns True when the store changed.
        """
        with self._lock:
            changed = self._collect()
            self._renew()
            changed = self._reap() or changed
            while not self._stopping.is_set() and len(self.running) < self.limit and not self._held():
                started = self._claim()
                if started is None:
                    break
                changed = True
                if not started:  # the executor could not start it: try again next sweep
                    break
        return changed

    def _held(self) -> bool:
        return self.hold is not None and self.hold() is not None

    def _collect(self) -> bool:
        changed = False
        for job_id, leased in list(self.running.items()):
            ids = ids_of(leased.job)
            try:
                outcome = leased.run.poll()
            except RunLost as e:
                del self.running[job_id]
                log.error("job %d: its run died (%s); it runs again when its lease expires", job_id, e, extra=ids)
                continue
            if outcome is None:
                continue
            del self.running[job_id]
            self._finish(leased, outcome)
            changed = True
        return changed

    def _finish(self, leased: _Leased, outcome: Outcome) -> None:
        job, ids = leased.job, ids_of(leased.job)
        result, error = outcome.result, outcome.error
        state = "done" if error is None else "failed"
        try:
            json.dumps(result)
        except (TypeError, ValueError) as e:
            state, result, error = "failed", None, str(e)
        if state == "failed" and outcome.retry_later and job.attempts < self.store.max_attempts:
            return self._defer(leased, error or "failed")
        try:
            if self.store.finish(job.id, leased.owner, state, result=result, error=error):
                log.info("job %d %s in %.1f s%s", job.id, state, time.monotonic() - leased.started,
                         f": {error}" if error else "", extra=ids)
            else:
                log.warning("job %d ended %s but its lease was lost (another worker took it over); "
                            "outcome discarded", job.id, state, extra=ids)
        except StoreError as e:
            log.error("job %d: could not record its outcome (%s); it will run again when its lease expires",
                      job.id, e, extra=ids)

    def _defer(self, leased: _Leased, error: str) -> None:
        job, ids = leased.job, ids_of(leased.job)
        delay = self.store.lease_s * 4 ** (job.attempts - 1)  # a lease, as for a dead worker; then longer
        try:
            if self.store.defer(job.id, leased.owner, delay, error):
                log.warning("job %d: %s; it runs again in %.0f s (attempt %d of %d)", job.id, error, delay,
                            job.attempts + 1, self.store.max_attempts, extra=ids)
            else:
                log.warning("job %d asked to run again but its lease was lost", job.id, extra=ids)
        except StoreError as e:
            log.error("job %d: could not defer it (%s); it will run again when its lease expires", job.id, e,
                      extra=ids)

    def _renew(self) -> None:
        every = self.store.lease_s / 3
        for leased in list(self.running.values()):
            if time.monotonic() - leased.renewed < every:
                continue
            ids = ids_of(leased.job)
            try:
                if self.store.heartbeat(leased.job.id, leased.owner):
                    leased.renewed = time.monotonic()
                else:
                    log.warning("job %d lost its lease; another worker may run it", leased.job.id, extra=ids)
            except StoreError as e:
                log.error("job %d: heartbeat failed: %s", leased.job.id, e, extra=ids)

    def _reap(self) -> bool:
        if time.monotonic() - self._reaped < min(self.store.lease_s / 3, 10.0):
            return False
        self._reaped = time.monotonic()
        try:
            exhausted = self.store.take_exhausted(worker_id())
        except StoreError as e:
            log.error("could not look for exhausted jobs: %s", e)
            return False
        for job in exhausted:
            self._report(job)
        return bool(exhausted)

    def _report(self, job: JobRecord) -> None:
        log.error("job %d (%s) failed: %s", job.id, job.key, job.error, extra=ids_of(job))
        if self.on_exhausted is None:
            return
        try:
            self.on_exhausted(job)
        except Exception:
            log.exception("job %d: reporting its failure failed", job.id, extra=ids_of(job))

    def _claim(self) -> bool | None:
        """Claim and start one job: None when there is none, False when it could not start."""
        owner = worker_id()
        try:
            job = self.store.claim(owner)
        except StoreError as e:
            log.error("%s could not claim a job: %s", owner, e)
            return None
        if job is None:
            return None
        ids = ids_of(job)
        try:
            run = self._resume(job)
            if run is None and job.call_id is not None and job.attempts >= self.store.max_attempts:
                return self._give_up(job, owner)
            if run is None:
                run = self.executor.start(job)
        except Exception as e:  # noqa: BLE001 - e.g. Modal unreachable: the job waits for the next sweep
            log.error("job %d: could not start (%s); trying again", job.id, e, extra=ids)
            self._release(job, owner)
            return False
        now = time.monotonic()
        self.running[job.id] = _Leased(job, owner, run, now, now)
        if isinstance(run, RemoteRun) and run.call_id == job.call_id:
            log.info("job %d (%s) taken over by %s: its call %s is still running or returned", job.id, job.key,
                     owner, run.call_id, extra=ids)
            return True
        log.info("job %d (%s) started by %s, attempt %d", job.id, job.key, owner,
                 job.attempts + (job.call_id is not None), extra=ids)
        if isinstance(run, RemoteRun):
            self._record_call(job, owner, run.call_id)
        return True

    def _resume(self, job: JobRecord) -> Run | None:
        """The run of the job's recorded call when the executor can ask it and it did not die."""
        if job.call_id is None or not isinstance(self.executor, Resumer):
            return None
        run = self.executor.resume(job)
        if run is None:
            log.warning("job %d: its call %s is gone; starting it again", job.id, job.call_id, extra=ids_of(job))
        return run

    def _record_call(self, job: JobRecord, owner: str, call_id: str) -> None:
        try:
            if not self.store.record_call(job.id, owner, call_id):
                log.warning("job %d lost its lease before its call %s was recorded", job.id, call_id,
                            extra=ids_of(job))
        except StoreError as e:
            log.error("job %d: could not record its call %s (%s); whoever takes the job over starts it again",
                      job.id, call_id, e, extra=ids_of(job))

    def _give_up(self, job: JobRecord, owner: str) -> bool:
        """Fail a job whose last attempt's call died, as `take_exhausted` fails one whose worker died."""
        error = f"gave up after {job.attempts} attempts: the worker died each time"
        try:
            if not self.store.finish(job.id, owner, "failed", error=error):
                return True
        except StoreError as e:
            log.error("job %d: could not give it up (%s); trying again when its lease expires", job.id, e,
                      extra=ids_of(job))
            return True
        self._report(replace(job, state="failed", error=error))
        return True

    def _release(self, job: JobRecord, owner: str) -> bool:
        try:
            self.store.release(job.id, owner)
            return True
        except StoreError as e:
            log.error("job %d could not be released (%s): it will run again when its lease expires",
                      job.id, e, extra=ids_of(job))
            return False

    # -- lifecycle --------------------------------------------------------

    def start(self) -> None:
        """Sweep every `poll_s` on a thread of its own until `stop`."""
        if self._thread is not None:
            raise RuntimeError("this lease runner was already started")
        self._thread = threading.Thread(target=self._loop, name=f"{self.name}-runner", daemon=True)
        self._thread.start()
        log.info("%s pool started: %d at a time on %s", self.name, self.limit, self.store.path)

    def wake(self) -> None:
        """Sweep now instead of at the next poll: the intake of this process queued a job (a runner in another
        process finds it at its next poll)."""
        self._nudge.set()

    def _loop(self) -> None:
        while not self._halt.is_set():
            try:
                self.sweep()
            except Exception:
                log.exception("%s sweep failed; trying again", self.name)
            self._nudge.wait(self.poll_s)
            self._nudge.clear()

    @property
    def stopping(self) -> bool:
        """True once `stop` has begun."""
        return self._stopping.is_set()

    def stop(self, grace_s: float = 30.0, on_stopped: Callable[[list[int]], None] | None = None) -> list[int]:
        """Stop claiming, give running jobs `grace_s` to finish, release the rest; return their ids.

        A released job is queued again without counting the attempt. Its run may
        still be going (the process is about to exit); whatever it ends with is
        discarded, since it no longer holds the lease. `on_stopped(released ids)`
        runs before `wait_stopped` returns.
        """
        self._stopping.set()
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            if self._thread is None:
                self.sweep()
            with self._lock:
                if not self.running:
                    break
            time.sleep(min(self.poll_s, 0.05))
        with self._lock:
            self._collect()  # what ended during the last wait
            left = list(self.running.values())
            self.running.clear()
            self._halt.set()
            self._nudge.set()
        released = []
        for leased in left:
            leased.run.abandon()
            if self._release(leased.job, leased.owner):
                released.append(leased.job.id)
                log.warning("job %d released at shutdown after %.0f s of grace: it will run again",
                            leased.job.id, grace_s, extra=ids_of(leased.job))
        if self._thread is not None:
            self._thread.join(self.poll_s + 1.0)
        log.info("%s pool stopped", self.name)
        if on_stopped is not None:
            on_stopped(released)
        self._stopped.set()
        return released

    def wait_stopped(self, timeout: float | None = None) -> bool:
        """Block until `stop` and its `on_stopped` have completed (e.g. from a signal); False on timeout."""
        return self._stopped.wait(timeout)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until the store holds no queued or running job and this runner runs none; False on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            counts = self.store.counts()
            with self._lock:
                busy = bool(self.running)
            if not busy and counts["queued"] == 0 and counts["running"] == 0:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
