"""The worker pool over a real store, SQLite and PostgreSQL (`store_factory`): runs, failures, dead
workers, graceful stop, signals."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from bot.jobs.store import JobRecord, JobStore
from bot.jobs.lease import LeaseRunner, Outcome, worker_id
from bot.jobs.worker import ThreadExecutor
from tests.support.stores import StoreFactory

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def store(store_factory: StoreFactory) -> JobStore:
    return store_factory(lease_s=0.5, max_attempts=3)


def enqueue(store: JobStore, key: str, payload: dict | None = None) -> int:
    return store.record_delivery(f"d-{time.monotonic_ns()}", "issues", "queued", (key, payload or {}))


def child(code: str, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", code, *args], env=env, text=True, stdout=subprocess.PIPE)


def test_worker_ids_are_unique() -> None:
    a, b = worker_id(), worker_id()
    assert a != b and a.split(":")[1] == str(os.getpid())


def test_a_pool_runs_every_job(store: JobStore) -> None:
    ids = [enqueue(store, f"octo/hello#{n}", {"n": n}) for n in range(20)]
    threads: set[str] = set()

    def handle(job: JobRecord) -> dict:
        threads.add(threading.current_thread().name)
        time.sleep(0.05)
        return Outcome(result={"double": job.payload["n"] * 2})

    pool = LeaseRunner(store, ThreadExecutor(handle), limit=4, poll_s=0.05)
    pool.start()
    assert pool.wait_idle(10)
    pool.stop(1)
    for n, job_id in enumerate(ids):
        job = store.job(job_id)
        assert (job.state, job.result, job.attempts) == ("done", {"double": 2 * n}, 1)
    assert len(threads) > 1


def test_jobs_on_one_key_never_overlap(store: JobStore) -> None:
    spans: list[tuple[float, float]] = []

    def handle(job: JobRecord) -> dict:
        start = time.monotonic()
        time.sleep(0.1)
        spans.append((start, time.monotonic()))
        return Outcome(result={})

    for _ in range(3):
        enqueue(store, "octo/hello#1")
    pool = LeaseRunner(store, ThreadExecutor(handle), limit=3, poll_s=0.02)
    pool.start()
    assert pool.wait_idle(10)
    pool.stop(1)
    spans.sort()
    assert len(spans) == 3
    assert all(end <= next_start for (_, end), (next_start, _) in zip(spans, spans[1:]))


def test_a_handler_exception_fails_the_job(store: JobStore, caplog: pytest.LogCaptureFixture) -> None:
    job_id = enqueue(store, "octo/hello#1")

    def handle(job: JobRecord) -> dict:
        raise RuntimeError("the sandbox image is missing")

    pool = LeaseRunner(store, ThreadExecutor(handle), limit=1, poll_s=0.02)
    with caplog.at_level(logging.INFO, logger="bot.jobs.worker"):
        pool.start()
        assert pool.wait_idle(5)
        pool.stop(1)
    job = store.job(job_id)
    assert (job.state, job.error) == ("failed", "the sandbox image is missing")
    failed = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert failed and failed[0].job_id == job_id and failed[0].exc_info
    assert all(r.job_id == job_id for r in caplog.records if "job " in r.getMessage())


def test_a_result_that_is_not_json_fails_the_job(store: JobStore) -> None:
    job_id = enqueue(store, "octo/hello#1")
    pool = LeaseRunner(store, ThreadExecutor(lambda job: Outcome(result={"when": object()})), limit=1, poll_s=0.02)
    pool.start()
    assert pool.wait_idle(5)
    pool.stop(1)
    assert store.job(job_id).state == "failed"
    assert "JSON serializable" in store.job(job_id).error

def test_a_run_that_asks_to_run_later_waits_longer_each_time_then_runs(store: JobStore) -> None:
    job_id = enqueue(store, "octo/hello#1")
    starts: list[float] = []

    def handle(job: JobRecord) -> Outcome:
        starts.append(time.monotonic())
        if len(starts) < 3:
            return Outcome(result={"state": "failed"}, error="GitHub did not answer: 502", retry_later=True)
        return Outcome(result={"state": "success"})

    pool = LeaseRunner(store, ThreadExecutor(handle), limit=1, poll_s=0.02)
    pool.start()
    assert pool.wait_idle(10)
    pool.stop(1)
    job = store.job(job_id)
    assert (job.state, job.attempts, job.result, job.error) == ("done", 3, {"state": "success"}, None)
    first, second = starts[1] - starts[0], starts[2] - starts[1]
    assert 0.5 <= first < 2.0 <= second, (first, second)  # a lease (0.5 s), then four times as long


def test_a_run_that_asks_to_run_later_every_time_fails_after_its_last_attempt(store: JobStore,
                                                                               store_factory: StoreFactory) -> None:
    job_id = enqueue(store, "octo/hello#1")
    starts: list[int] = []

    def handle(job: JobRecord) -> Outcome:
        starts.append(job.attempts)
        return Outcome(result={"state": "failed"}, error="GitHub did not answer: 502", retry_later=True)

    pool = LeaseRunner(store_factory(lease_s=0.1, max_attempts=3), ThreadExecutor(handle), limit=1, poll_s=0.02)
    pool.start()
    assert pool.wait_idle(10)
    pool.stop(1)
    assert starts == [1, 2, 3]  # max_attempts
    assert (store.job(job_id).state, store.job(job_id).error) == ("failed", "GitHub did not answer: 502")



def test_heartbeats_keep_a_job_longer_than_its_lease(store: JobStore, store_factory: StoreFactory) -> None:
    job_id = enqueue(store, "octo/hello#1")
    runs: list[int] = []
    other = store_factory(lease_s=0.5)

    def handle(job: JobRecord) -> dict:
        runs.append(job.id)
        deadline = time.monotonic() + 1.5  # three leases
        while time.monotonic() < deadline:
            assert other.claim("intruder") is None
            time.sleep(0.1)
        return Outcome(result={"slow": True})

    pool = LeaseRunner(store, ThreadExecutor(handle), limit=2, poll_s=0.02)
    pool.start()
    assert pool.wait_idle(10)
    pool.stop(1)
    assert runs == [job_id]
    assert (store.job(job_id).state, store.job(job_id).attempts) == ("done", 1)


def test_stop_releases_a_job_still_running(store: JobStore) -> None:
    job_id = enqueue(store, "octo/hello#1")
    started, let_go = threading.Event(), threading.Event()

    def handle(job: JobRecord) -> dict:
        started.set()
        let_go.wait(10)
        return Outcome(result={"late": True})

    pool = LeaseRunner(store, ThreadExecutor(handle), limit=1, poll_s=0.02)
    pool.start()
    assert started.wait(5)
    t0 = time.monotonic()
    assert pool.stop(grace_s=0.3) == [job_id]
    assert 0.3 <= time.monotonic() - t0 < 2
    job = store.job(job_id)
    assert (job.state, job.attempts) == ("queued", 0)
    let_go.set()  # the abandoned thread ends; its outcome must not land
    time.sleep(0.1)
    assert store.job(job_id).state == "queued"


def test_a_released_job_cancelled_under_its_thread_is_logged_not_raised(
        store: JobStore, caplog: pytest.LogCaptureFixture) -> None:
    from bot.core.errors import Cancelled

    job_id = enqueue(store, "octo/hello#1")
    started, cancel = threading.Event(), threading.Event()
    raised: list[BaseException] = []

    def handle(job: JobRecord) -> dict:
        started.set()
        cancel.wait(10)
        raise Cancelled("the sandbox was removed at shutdown")

    hook, threading.excepthook = threading.excepthook, lambda args: raised.append(args.exc_value)
    try:
        pool = LeaseRunner(store, ThreadExecutor(handle), limit=1, poll_s=0.02)
        with caplog.at_level(logging.INFO, logger="bot.jobs.worker"):
            pool.start()
            assert started.wait(5)
            assert pool.stop(grace_s=0.1) == [job_id]
            cancel.set()  # what `close_all` does to the released job's sandbox
            deadline = time.monotonic() + 5
            while "stopped after it was released" not in caplog.text and time.monotonic() < deadline:
                time.sleep(0.02)
    finally:
        threading.excepthook = hook
    assert "stopped after it was released" in caplog.text and raised == []
    assert store.job(job_id).state == "queued"


def test_stop_waits_for_a_job_that_finishes_in_grace(store: JobStore) -> None:
    job_id = enqueue(store, "octo/hello#1")
    started = threading.Event()

    def handle(job: JobRecord) -> dict:
        started.set()
        time.sleep(0.3)
        return Outcome(result={"ok": True})

    pool = LeaseRunner(store, ThreadExecutor(handle), limit=1, poll_s=0.02)
    pool.start()
    assert started.wait(5)
    assert pool.stop(grace_s=5) == []
    assert store.job(job_id).state == "done"


def test_a_job_whose_worker_died_is_taken_over(store: JobStore) -> None:
    job_id = enqueue(store, "octo/hello#1")
    assert store.claim("ghost-host:1:1").id == job_id  # claimed, never heartbeated nor finished
    pool = LeaseRunner(store, ThreadExecutor(lambda job: Outcome(result={"attempt": job.attempts})), limit=2, poll_s=0.05)
    pool.start()
    assert pool.wait_idle(5)
    pool.stop(1)
    job = store.job(job_id)
    assert (job.state, job.result, job.attempts) == ("done", {"attempt": 2}, 2)


def test_exhausted_jobs_are_reported(store_factory: StoreFactory) -> None:
    store = store_factory(lease_s=0.3, max_attempts=1)
    job_id = enqueue(store, "octo/hello#1")
    store.claim("ghost")
    reported: list[JobRecord] = []
    pool = LeaseRunner(store, ThreadExecutor(lambda job: Outcome(result={})), limit=1, poll_s=0.05, on_exhausted=reported.append)
    pool.start()
    assert pool.wait_idle(5)
    pool.stop(1)
    assert [(j.id, j.state) for j in reported] == [(job_id, "failed")]
    assert store.job(job_id).error == "gave up after 1 attempts: the worker died each time"


RUNNER = """
import sys, time
from bot.jobs.lease import LeaseRunner, Outcome
from bot.jobs.worker import ThreadExecutor
from bot.server.run import stop_runner
from bot.server.shutdown import on_shutdown
from tests.support.stores import open_at
store = open_at(sys.argv[1], lease_s=0.5)
def handle(job):
    print(job.id, flush=True)
    time.sleep(60)
    return Outcome(result={})
pool = LeaseRunner(store, ThreadExecutor(handle), limit=1, poll_s=0.02)
on_shutdown(lambda name: stop_runner(pool, 0.3, name, lambda released: print("stopped", flush=True)))
pool.start()
pool.wait_stopped()
"""


def test_sigterm_releases_the_running_job(store_factory: StoreFactory) -> None:
    store = store_factory(lease_s=0.5)
    job_id = enqueue(store, "octo/hello#1")
    proc = child(RUNNER, store_factory.location)
    assert proc.stdout.readline().strip() == str(job_id)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=10)
    assert proc.returncode == 0
    assert out.strip() == "stopped"
    assert (store.job(job_id).state, store.job(job_id).attempts) == ("queued", 0)


def test_a_sigkilled_worker_process_loses_its_job_to_another(store_factory: StoreFactory) -> None:
    store = store_factory(lease_s=0.5)
    job_id = enqueue(store, "octo/hello#1")
    proc = child(RUNNER, store_factory.location)
    assert proc.stdout.readline().strip() == str(job_id)
    time.sleep(0.6)  # the dead process's heartbeats had kept the lease alive
    assert store.claim("w") is None
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    pool = LeaseRunner(store, ThreadExecutor(lambda job: Outcome(result={"by": "survivor"})), limit=1, poll_s=0.05)
    pool.start()
    assert pool.wait_idle(5)
    pool.stop(1)
    job = store.job(job_id)
    assert (job.state, job.result, job.attempts) == ("done", {"by": "survivor"}, 2)


def test_a_woken_runner_claims_at_once_not_at_its_next_poll(store: JobStore) -> None:
    """The intake wakes its process's runner for each job it queues (bot/server/webhooks.py)."""
    started = threading.Event()

    def handle(job: JobRecord) -> Outcome:
        started.set()
        return Outcome(result={})

    pool = LeaseRunner(store, ThreadExecutor(handle), limit=1, poll_s=30)
    pool.start()
    try:
        time.sleep(0.2)  # its first sweep found nothing; the next poll is 30 s away
        enqueue(store, "octo/hello#1")
        queued = time.monotonic()
        pool.wake()
        assert started.wait(5), "the job waited for the poll"
        assert time.monotonic() - queued < 2
    finally:
        pool.stop(1)


def test_a_held_runner_claims_nothing_until_its_hold_lifts(store: JobStore) -> None:
    job_id = enqueue(store, "octo/hello#1")
    reason: list[str | None] = ["ANTHROPIC_API_KEY was rejected"]
    pool = LeaseRunner(store, ThreadExecutor(lambda job: Outcome(result={})), poll_s=0.02, hold=lambda: reason[0])
    for _ in range(3):
        assert not pool.sweep()
    job = store.job(job_id)
    assert job is not None and (job.state, job.attempts) == ("queued", 0)  # waiting: no attempt spent
    reason[0] = None
    pool.start()
    assert pool.wait_idle(10)
    pool.stop(1)
    assert store.job(job_id).state == "done"
