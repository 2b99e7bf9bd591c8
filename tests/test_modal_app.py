"""bot/modal_app.py builds offline, serves the real webhook app over PostgreSQL, runs each job once across
several `web` containers, and never runs a job twice at once when a dispatcher restarts.

No Modal server is reachable here: these tests build the app object and run its
pieces (the control app of a `web` container, its dispatcher) with the modal
double's `Function.spawn` in place of `run_job.spawn` and its
`FunctionCall.from_id` (tests/fakes/modal_double.py). The job store is real:
PostgreSQL, as on Modal, and the dispatcher also against SQLite. What Modal itself
does with the app is not verified here (docs/scale.md).
"""

from __future__ import annotations

import socket
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import modal
import modal.exception
import pytest
from flask import Flask

from bot.config import Settings
from bot.core.errors import ConfigError
from bot.jobs.lease import LeaseRunner
from bot.server.context import app_context
from bot.jobs.store import JobRecord, JobStore
from bot.model import Usage
from bot.run.result import Figures, RunResult
from tests.fakes import modal_double
from tests.fakes.webhook_examples import example
from tests.server.conftest import SECRET, delivery
from tests.support.stores import StoreFactory

SUCCESS = RunResult("job-1", "success", pr_url="https://github.com/octo/repo/pull/2", branch="decode/issue-1",
                    finished_at=1.0).to_json()


class NoNetwork:
    """Refuses every outbound connection while importing and building the Modal app."""

    def __enter__(self) -> "NoNetwork":
        self._connect = socket.socket.connect

        def refuse(sock: socket.socket, address: object) -> None:
            raise AssertionError(f"bot/modal_app.py tried to connect to {address} while building")

        socket.socket.connect = refuse  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        socket.socket.connect = self._connect  # type: ignore[method-assign]


@pytest.fixture(scope="module")
def modal_app():
    with NoNetwork():
        import bot.modal_app as module
    return module


class RunJob:
    """`run_job` on the modal double: records every spawn, and each call returns `result` once `gate` is set
    (set from the start unless `hold`). `down` makes the spawn fail as when Modal is unreachable."""

    def __init__(self, *, hold: bool = False, result: dict | None = None) -> None:
        self.spawned: list[int] = []  # job ids, one per call
        self.calls: list[modal_double.FunctionCall] = []
        self.gate = threading.Event()
        if not hold:
            self.gate.set()
        self.result = result or SUCCESS
        self.down = False
        self._lock = threading.Lock()
        self._function = modal_double.Function(self._run)

    def _run(self, job: dict[str, Any]) -> dict[str, Any]:
        assert self.gate.wait(30), "the test never let the call return"
        return dict(self.result)

    def spawn(self, job: dict[str, Any]) -> modal_double.FunctionCall:
        if self.down:
            raise modal.exception.ConnectionError("could not reach Modal")
        call = self._function.spawn(job)
        with self._lock:
            self.spawned.append(job["id"])
            self.calls.append(call)
        return call


def dispatcher(modal_app, store: JobStore, run_job: RunJob, **options: Any) -> LeaseRunner:
    return modal_app.dispatcher(store, run_job.spawn, modal_double.FunctionCall.from_id, **options)


METRICS_TOKEN = "metrics-tok-1"


def web(modal_app, location: str, data_dir: Path, run_job: RunJob, *, lease_s: float = 60.0) -> Flask:
    """The control app of one `web` container on the database at `location`, its dispatcher not started."""
    settings = Settings(github_webhook_secret=SECRET, data_dir=data_dir, database_url=location, lease_s=lease_s,
                        metrics_token=METRICS_TOKEN)
    return modal_app.control(settings, spawn=run_job.spawn, from_id=modal_double.FunctionCall.from_id, start=False)


def enqueue(store: JobStore, delivery_id: str, key: str = "octo/repo#1") -> int:
    job_id = store.record_delivery(delivery_id, "issues", "queued", (key, {"n": delivery_id}))
    assert isinstance(job_id, int)
    return job_id


def post_labeled(app: Flask, number: int = 1, delivery_id: str | None = None) -> int:
    body, headers = delivery("issues", example("issues", "labeled", sender_type="User", label__name="agent",
                                               issue__number=number), delivery_id=delivery_id)
    return app.test_client().post("/webhook", data=body, headers=headers).status_code


def sweep_until(runner: LeaseRunner, done: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "the dispatcher never got there"
        runner.sweep()
        time.sleep(0.01)


def ended(call: modal_double.FunctionCall) -> None:
    """Wait until `call` returned, as Modal would report it."""
    call.get(timeout=10)


# -- the app --------------------------------------------------------------------


def test_the_app_builds_offline_with_its_functions(modal_app):
    assert isinstance(modal_app.app, modal.App)
    assert modal_app.app.name == "decode-bot"
    with warnings.catch_warnings():  # registered_functions is deprecated for removal in modal 1.7
        warnings.simplefilter("ignore")
        functions = modal_app.app.registered_functions
        endpoints = modal_app.app.registered_web_endpoints
    assert set(functions) == {"web", "run_job"}
    assert endpoints == ["web"]
    assert modal_app.WEB_MAX_CONTAINERS > 1  # several web containers may serve and dispatch


def test_modal_defaults_yield_to_the_secret(modal_app):
    assert modal_app.settings_from({}).sandbox.mode == "modal"
    assert modal_app.settings_from({"SANDBOX_MODE": "docker", "DECODE_WORKERS": "5"}).pool.workers == 5


def test_without_a_database_url_the_web_app_says_what_to_set(modal_app, tmp_path):
    settings = modal_app.settings_from({"GITHUB_WEBHOOK_SECRET": SECRET, "DECODE_DATA_DIR": str(tmp_path)})
    with pytest.raises(ConfigError, match="set DECODE_DATABASE_URL in the decode-bot Modal Secret "
                                          "to a postgresql:// URL"):
        modal_app.control(settings, spawn=RunJob().spawn, from_id=modal_double.FunctionCall.from_id, start=False)
    assert not (tmp_path / "jobs.sqlite3").exists()  # no SQLite fallback that a restart would lose


def test_the_served_app_is_the_webhook_app_over_postgres(modal_app, postgres_factory: StoreFactory, tmp_path):
    app = web(modal_app, postgres_factory.location, tmp_path, RunJob())
    client = app.test_client()
    assert client.get("/healthz").status_code == 200
    body, headers = delivery("issues", {"action": "opened"})
    del headers["X-Hub-Signature-256"]
    assert client.post("/webhook", data=body, headers=headers).status_code == 401
    assert post_labeled(app, delivery_id="d-1") == 202
    store = postgres_factory()  # what any other container sees: the job is committed before the 202
    assert [job.state for job in store.runs()] == ["queued"]


# -- several web containers -------------------------------------------------------


def test_two_web_containers_run_each_job_once(modal_app, postgres_factory: StoreFactory, tmp_path):
    run_job = RunJob()
    apps = [web(modal_app, postgres_factory.location, tmp_path / name, run_job) for name in ("a", "b")]
    ids = [f"d-{n}" for n in range(1, 13)]
    # Every delivery reaches both containers (a redelivery, or GitHub retrying after a timeout).
    requests = [(app, n, delivery_id) for n, delivery_id in enumerate(ids, start=1) for app in apps]
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda r: post_labeled(*r), requests))
    assert Counter(answers) == {202: 12, 200: 12}  # one job per delivery, the other answer a duplicate
    store = postgres_factory()
    assert store.counts()["queued"] == 12

    def dispatch(runner: LeaseRunner) -> None:  # each container's dispatcher, sweeping at the same time
        sweep_until(runner, lambda: store.counts()["done"] == 12, timeout=30)

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(dispatch, [app_context(app).runner for app in apps]))
    jobs = store.runs()
    assert sorted(run_job.spawned) == sorted(job.id for job in jobs)  # each job ran exactly once
    assert all(job.state == "done" and job.attempts == 1 and job.call_id for job in jobs)


# -- a restarted dispatcher and the calls it finds ----------------------------------


def test_a_restarted_dispatcher_takes_over_the_running_call(modal_app, postgres_factory: StoreFactory, tmp_path):
    run_job = RunJob(hold=True)
    first = web(modal_app, postgres_factory.location, tmp_path / "a", run_job, lease_s=0.3)
    assert post_labeled(first, delivery_id="d-1") == 202
    app_context(first).runner.sweep()  # claimed and spawned; then the container goes away mid-run
    store = postgres_factory()
    [job] = store.runs()
    assert run_job.spawned == [job.id] and job.call_id == run_job.calls[0].object_id
    time.sleep(0.4)  # its lease expires

    restarted = web(modal_app, postgres_factory.location, tmp_path / "b", run_job, lease_s=0.3)
    runner = app_context(restarted).runner
    for _ in range(5):  # past several lease periods: the new dispatcher keeps the lease alive
        runner.sweep()
        time.sleep(0.1)
    assert run_job.spawned == [job.id]  # not spawned a second time while the first call runs
    assert store.job(job.id).state == "running" and store.job(job.id).attempts == 1
    assert store.claim("another-container") is None

    run_job.gate.set()
    sweep_until(runner, lambda: store.job(job.id).state == "done")
    assert store.job(job.id).result["pr_url"] == SUCCESS["pr_url"]
    assert run_job.spawned == [job.id]


def test_a_call_that_returned_unwatched_has_its_result_recorded(modal_app, store_factory: StoreFactory):
    store = store_factory(lease_s=0.2)
    run_job = RunJob()
    job_id = enqueue(store, "d-1")
    dispatcher(modal_app, store, run_job).sweep()  # spawned; the dispatcher died before the call returned
    ended(run_job.calls[0])
    time.sleep(0.3)
    sweep_until(dispatcher(modal_app, store, run_job), lambda: store.job(job_id).state == "done")
    assert store.job(job_id).result == SUCCESS and store.job(job_id).attempts == 1
    assert run_job.spawned == [job_id]


def test_a_call_that_died_is_spawned_again(modal_app, store_factory: StoreFactory):
    store = store_factory(lease_s=0.2)
    run_job = RunJob(hold=True)
    job_id = enqueue(store, "d-1")
    dispatcher(modal_app, store, run_job).sweep()  # spawned; the dispatcher's container went away
    modal_double.kill_call(run_job.calls[0])  # and so did the call's
    time.sleep(0.3)
    restarted = dispatcher(modal_app, store, run_job)
    restarted.sweep()
    assert run_job.spawned == [job_id, job_id]
    job = store.job(job_id)
    assert job.attempts == 2 and job.call_id == run_job.calls[1].object_id
    run_job.gate.set()
    sweep_until(restarted, lambda: store.job(job_id).state == "done")


def test_a_call_modal_cannot_be_asked_about_is_not_spawned_again(modal_app, store_factory: StoreFactory):
    class Unreachable:
        def __init__(self, object_id: str) -> None:
            self.object_id = object_id

        def get(self, timeout: float | None = None) -> Any:
            raise modal.exception.ConnectionError("could not reach Modal")

    store = store_factory(lease_s=0.2)
    run_job = RunJob(hold=True)
    job_id = enqueue(store, "d-1")
    dispatcher(modal_app, store, run_job).sweep()
    time.sleep(0.3)
    modal_app.dispatcher(store, run_job.spawn, Unreachable).sweep()
    assert run_job.spawned == [job_id]  # the call may still run: ask again later, never guess
    assert store.job(job_id).state == "queued" and store.job(job_id).attempts == 1
    restarted = dispatcher(modal_app, store, run_job)
    restarted.sweep()
    assert run_job.spawned == [job_id] and store.job(job_id).state == "running"
    run_job.gate.set()
    sweep_until(restarted, lambda: store.job(job_id).state == "done")


def test_a_call_that_dies_every_time_is_given_up_and_reported(modal_app, store_factory: StoreFactory):
    store = store_factory(lease_s=0.2, max_attempts=2)
    run_job = RunJob(hold=True)
    reported: list[JobRecord] = []
    runner = dispatcher(modal_app, store, run_job, on_exhausted=reported.append)
    job_id = enqueue(store, "d-1")
    for attempt in (1, 2):
        runner.sweep()
        assert len(run_job.spawned) == attempt
        modal_double.kill_call(run_job.calls[-1])
        time.sleep(0.05)
        runner.sweep()  # sees the call died; the lease is left to expire
        time.sleep(0.3)
    runner.sweep()
    assert len(run_job.spawned) == 2
    assert [job.id for job in reported] == [job_id]
    job = store.job(job_id)
    assert job.state == "failed" and job.error == "gave up after 2 attempts: the worker died each time"
    run_job.gate.set()


# -- the dispatcher ---------------------------------------------------------------


def test_the_dispatcher_runs_a_job_and_records_its_outcome(modal_app, store_factory: StoreFactory):
    store = store_factory(lease_s=60)
    run_job = RunJob(hold=True)
    runner = dispatcher(modal_app, store, run_job)
    job_id = enqueue(store, "d-1")
    assert runner.sweep()
    assert run_job.spawned == [job_id]
    assert store.job(job_id).state == "running"
    assert not runner.sweep()  # still running: nothing new
    run_job.gate.set()
    sweep_until(runner, lambda: store.job(job_id).state == "done")
    assert store.job(job_id).result["pr_url"].endswith("/pull/2")


def test_a_failed_job_is_recorded_as_failed(modal_app, store_factory: StoreFactory):
    store = store_factory(lease_s=60)
    run_job = RunJob(result=RunResult("job-1", "failed", error="the agent could not clone the repository",
                                      exit_code=1).to_json())
    runner = dispatcher(modal_app, store, run_job)
    job_id = enqueue(store, "d-1")
    sweep_until(runner, lambda: store.job(job_id).state != "queued" and not runner.running)
    job = store.job(job_id)
    assert job.state == "failed" and job.error == "the agent could not clone the repository"
    assert job.result["exit_code"] == 1  # the whole conclusion is kept, failed or not


def test_a_call_that_asks_to_run_later_is_spawned_again_after_a_lease_as_a_new_attempt(
        modal_app, store_factory: StoreFactory):
    store = store_factory(lease_s=0.3)
    run_job = RunJob(result=RunResult("job-1", "failed", error="GitHub did not answer: 502", exit_code=1,
                                      retry_later=True).to_json())
    runner = dispatcher(modal_app, store, run_job)
    job_id = enqueue(store, "d-1")
    sweep_until(runner, lambda: store.job(job_id).error is not None)
    deferred = store.job(job_id)
    assert (deferred.state, deferred.call_id, run_job.spawned) == ("running", None, [job_id])
    run_job.result = SUCCESS
    sweep_until(runner, lambda: store.job(job_id).state == "done")
    assert run_job.spawned == [job_id, job_id] and store.job(job_id).attempts == 2
    assert run_job.calls[1].object_id != run_job.calls[0].object_id  # a new call, not the one that returned


def test_a_job_whose_spawn_failed_is_dispatched_by_the_next_sweep(modal_app, store_factory: StoreFactory):
    store = store_factory(lease_s=60)
    run_job = RunJob(hold=True)
    runner = dispatcher(modal_app, store, run_job)
    job_id = enqueue(store, "d-1")
    run_job.down = True
    runner.sweep()
    assert run_job.spawned == []
    assert store.job(job_id).state == "queued"
    assert store.job(job_id).attempts == 0  # a spawn that never happened is not an attempt
    run_job.down = False
    runner.sweep()
    assert run_job.spawned == [job_id]
    assert store.job(job_id).attempts == 1
    run_job.gate.set()


def test_one_job_per_issue_at_a_time(modal_app, store_factory: StoreFactory):
    store = store_factory(lease_s=60)
    run_job = RunJob(hold=True)
    runner = dispatcher(modal_app, store, run_job, limit=8)
    first = enqueue(store, "d-1", "octo/repo#1")
    enqueue(store, "d-2", "octo/repo#1")
    other = enqueue(store, "d-3", "octo/repo#2")
    runner.sweep()
    assert sorted(run_job.spawned) == [first, other]
    run_job.gate.set()


def test_the_run_figures_of_a_call_reach_the_control_apps_metrics(modal_app, postgres_factory: StoreFactory,
                                                                   tmp_path):
    record = RunResult("job-1", "success", branch="decode/1", stop_reason="completed", figures=Figures(
        turns=3, usage=Usage(input_tokens=1000, output_tokens=200), cost_usd=0.25, seconds=42.0)).to_json()
    app = web(modal_app, postgres_factory.location, tmp_path, RunJob(result=record))
    store, runner = app_context(app).store, app_context(app).runner
    job_id = enqueue(store, "d-1")
    sweep_until(runner, lambda: store.job(job_id).state == "done")
    assert store.job(job_id).result == record
    assert app.test_client().get("/metrics").status_code == 401  # a public endpoint: the token is needed
    text = app.test_client().get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}).get_data(
        as_text=True)
    assert "decode_cost_usd_total 0.25" in text
    assert 'decode_tokens_total{kind="input"} 1000.0' in text
    assert 'decode_run_duration_seconds_count{state="success"} 1.0' in text
