"""bot/modal_app.py builds offline, serves the real webhook app, and never loses an accepted job.

No Modal server is reachable here: these tests build the app object and run its
pieces (the control app, the snapshot store, the dispatcher) with a spawn
double in place of `run_job.spawn`. What Modal itself does with them is not
verified here (docs/scale.md).
"""

from __future__ import annotations

import socket
import sqlite3
import time
import warnings

import modal
import pytest

from bot.config import Settings
from bot.server.context import app_context
from bot.store import JobRecord, Store
from tests.server.conftest import SECRET, delivery
from tests.support.webhooks import labeled


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


class FakeCall:
    """A `Call` the test ends by hand."""

    def __init__(self, job: JobRecord) -> None:
        self.job = job
        self.outcome: dict | None = None
        self.dead = False

    def poll(self) -> dict | None:
        from bot.modal_app import CallLost

        if self.dead:
            raise CallLost("the container was preempted")
        return self.outcome


class Spawner:
    """Stands in for `run_job.spawn`: records each job; fails while `down` is set."""

    def __init__(self) -> None:
        self.calls: list[FakeCall] = []
        self.down = False

    def __call__(self, job: JobRecord) -> FakeCall:
        if self.down:
            raise ConnectionError("api.modal.com unreachable")
        call = FakeCall(job)
        self.calls.append(call)
        return call


def job_for(store: Store, delivery_id: str, key: str = "octo/repo#1") -> int:
    job_id = store.record_delivery(delivery_id, "issues", "queued", (key, {"n": delivery_id}))
    assert isinstance(job_id, int)
    return job_id


def test_the_app_builds_offline_with_its_functions(modal_app):
    assert isinstance(modal_app.app, modal.App)
    assert modal_app.app.name == "decode-bot"
    with warnings.catch_warnings():  # registered_functions is deprecated for removal in modal 1.7
        warnings.simplefilter("ignore")
        functions = modal_app.app.registered_functions
        endpoints = modal_app.app.registered_web_endpoints
    assert set(functions) == {"web", "run_job"}
    assert endpoints == ["web"]


def test_modal_defaults_yield_to_the_secret(modal_app):
    assert modal_app.settings_from({}).sandbox_mode == "modal"
    assert modal_app.settings_from({"SANDBOX_MODE": "docker", "DECODE_WORKERS": "5"}).workers == 5


def test_the_served_app_is_the_webhook_app(modal_app, tmp_path):
    settings = Settings(github_webhook_secret=SECRET, data_dir=tmp_path / "local")
    commits: list[float] = []
    app = modal_app.control(settings, state_dir=tmp_path / "volume", commit=lambda: commits.append(time.time()),
                            spawn=Spawner(), start=False)
    client = app.test_client()
    assert client.get("/healthz").status_code == 200
    body, headers = delivery("issues", {"action": "opened"})
    del headers["X-Hub-Signature-256"]
    assert client.post("/webhook", data=body, headers=headers).status_code == 401
    assert commits == []  # nothing accepted, nothing committed


def test_an_accepted_delivery_is_on_the_volume_before_the_answer(modal_app, tmp_path):
    snapshot = tmp_path / "volume" / "jobs.sqlite3"
    seen: list[int] = []

    def commit() -> None:  # what the Volume would persist: the image as it is at commit time
        with sqlite3.connect(snapshot) as db:
            seen.append(db.execute("SELECT count(*) FROM jobs").fetchone()[0])

    store = modal_app.SnapshotStore(tmp_path / "local" / "jobs.sqlite3", snapshot, commit)
    job_id = job_for(store, "d-1")
    assert seen == [1]
    assert store.record_delivery("d-1", "issues", "queued", ("octo/repo#1", {})) is False  # redelivery
    assert seen == [1]
    store.close()

    restarted = modal_app.SnapshotStore(tmp_path / "new-container" / "jobs.sqlite3", snapshot, commit)
    assert restarted.job(job_id).state == "queued"
    assert restarted.record_delivery("d-1", "issues", "queued", ("octo/repo#1", {})) is False
    restarted.close()


def test_a_volume_that_refuses_the_commit_refuses_the_delivery(modal_app, tmp_path):
    settings = Settings(github_webhook_secret=SECRET, data_dir=tmp_path / "local")

    def commit() -> None:
        raise RuntimeError("volume commit failed")

    app = modal_app.control(settings, state_dir=tmp_path / "volume", commit=commit, spawn=Spawner(), start=False)
    body, headers = delivery("issues", labeled())
    answer = app.test_client().post("/webhook", data=body, headers=headers)
    assert answer.status_code == 503  # not durable, so not accepted: GitHub shows the failure
    assert "Modal Volume" in answer.get_json()["message"]


def test_the_dispatcher_runs_a_job_and_records_its_outcome(modal_app, tmp_path):
    store = Store(tmp_path / "jobs.sqlite3")
    spawn = Spawner()
    dispatcher = modal_app.dispatcher(store, spawn)
    job_id = job_for(store, "d-1")
    assert dispatcher.sweep()
    assert [c.job.id for c in spawn.calls] == [job_id]
    assert store.job(job_id).state == "running"
    assert not dispatcher.sweep()  # still running: the lease is renewed, nothing new
    spawn.calls[0].outcome = {"state": "success", "pr_url": "https://github.com/octo/repo/pull/2"}
    assert dispatcher.sweep()
    assert store.job(job_id).state == "done"
    assert store.job(job_id).result["pr_url"].endswith("/pull/2")
    store.close()


def test_a_failed_job_is_recorded_as_failed(modal_app, tmp_path):
    store = Store(tmp_path / "jobs.sqlite3")
    spawn = Spawner()
    dispatcher = modal_app.dispatcher(store, spawn)
    job_id = job_for(store, "d-1")
    dispatcher.sweep()
    spawn.calls[0].outcome = {"state": "failed", "exit_code": 1, "error": "the agent could not clone the repository",
                              "pr_url": None, "branch": None, "figures": None}
    dispatcher.sweep()
    assert store.job(job_id).state == "failed"
    assert store.job(job_id).error == "the agent could not clone the repository"
    assert store.job(job_id).result["exit_code"] == 1  # the whole conclusion is kept, failed or not
    store.close()


def test_a_job_whose_spawn_failed_is_dispatched_by_the_next_sweep(modal_app, tmp_path):
    store = Store(tmp_path / "jobs.sqlite3")
    spawn = Spawner()
    dispatcher = modal_app.dispatcher(store, spawn)
    job_id = job_for(store, "d-1")
    spawn.down = True
    dispatcher.sweep()
    assert spawn.calls == []
    assert store.job(job_id).state == "queued"
    assert store.job(job_id).attempts == 0  # a spawn that never happened is not an attempt
    spawn.down = False
    dispatcher.sweep()
    assert [c.job.id for c in spawn.calls] == [job_id]
    assert store.job(job_id).attempts == 1
    store.close()


def test_a_job_whose_dispatcher_died_is_dispatched_again(modal_app, tmp_path):
    store = Store(tmp_path / "jobs.sqlite3", lease_s=0.05)
    first, second = Spawner(), Spawner()
    job_id = job_for(store, "d-1")
    modal_app.dispatcher(store, first).sweep()  # claimed and spawned; then the container went away
    assert len(first.calls) == 1
    time.sleep(0.1)
    modal_app.dispatcher(store, second).sweep()
    assert [c.job.id for c in second.calls] == [job_id]
    assert store.job(job_id).attempts == 2
    store.close()


def test_a_dead_call_runs_again_then_is_reported(modal_app, tmp_path):
    store = Store(tmp_path / "jobs.sqlite3", lease_s=0.05, max_attempts=2)
    spawn = Spawner()
    reported: list[JobRecord] = []
    dispatcher = modal_app.dispatcher(store, spawn, on_exhausted=reported.append)
    job_id = job_for(store, "d-1")
    for attempt in (1, 2):
        dispatcher.sweep()
        assert len(spawn.calls) == attempt
        spawn.calls[-1].dead = True
        dispatcher.sweep()  # sees the call died; the lease is left to expire
        time.sleep(0.1)
    dispatcher.sweep()
    assert [job.id for job in reported] == [job_id]
    assert store.job(job_id).state == "failed"
    store.close()


def test_one_job_per_issue_at_a_time(modal_app, tmp_path):
    store = Store(tmp_path / "jobs.sqlite3")
    spawn = Spawner()
    dispatcher = modal_app.dispatcher(store, spawn, limit=8)
    first = job_for(store, "d-1", "octo/repo#1")
    job_for(store, "d-2", "octo/repo#1")
    other = job_for(store, "d-3", "octo/repo#2")
    dispatcher.sweep()
    assert sorted(c.job.id for c in spawn.calls) == [first, other]
    store.close()


def test_the_run_figures_of_a_call_reach_the_control_apps_metrics(modal_app, tmp_path):
    settings = Settings(github_webhook_secret=SECRET, data_dir=tmp_path / "local")
    spawn = Spawner()
    app = modal_app.control(settings, state_dir=tmp_path / "volume", commit=lambda: None, spawn=spawn, start=False)
    store, dispatcher = app_context(app).store, app_context(app).runner
    job_id = job_for(store, "d-1")
    dispatcher.sweep()
    record = {"state": "success", "exit_code": 0, "error": None, "pr_url": None, "branch": "decode/1", "figures": {
        "turns": 3, "seconds": 42.0, "cost_usd": 0.25,
        "tokens": {"input": 1000, "output": 200, "cache_read": 0, "cache_write": 0}}}
    spawn.calls[0].outcome = record
    dispatcher.sweep()
    assert store.job(job_id).result == record
    text = app.test_client().get("/metrics").get_data(as_text=True)
    assert "decode_cost_usd_total 0.25" in text
    assert 'decode_tokens_total{kind="input"} 1000.0' in text
    assert 'decode_run_duration_seconds_count{state="success"} 1.0' in text
