"""decode-bot on Modal, no host of yours: `modal deploy -m bot.modal_app`.

Two functions. `web` is a control container: the Flask webhook app
(`create_app`, unchanged intake) over the job store, with a dispatcher: the
lease runner of `decode worker` (bot/jobs/lease.py) with function calls of `run_job`
in place of threads. `run_job` executes the same handler as `decode worker`
(SANDBOX_MODE=modal by default: the harness runs in the function, the agent's
tools in Modal sandboxes) and returns the run's figures with its result, so the
control app's /metrics counts them.

Durability. The job store is PostgreSQL (bot/jobs/postgres.py) at
DECODE_DATABASE_URL, set in the `decode-bot` Modal Secret: a Modal container's
disk does not outlive it, and a Volume is no shared disk for a database (a
container sees others' writes only after commit and reload, concurrent commits of
one file are last-write-wins). So:

- `web` may run in several containers (Modal scales it, and a deploy runs the old
  and the new side by side). Each answers 202 only after the delivery's
  transaction committed, and each runs a dispatcher; the store's `SKIP LOCKED`
  claims, per-key locks and leases keep every job to one dispatcher at a time.
- `run_job` never touches the store: it gets the job as an argument and returns
  its outcome. The dispatcher claims the job under a lease, spawns the call,
  records the call's id with the job, heartbeats while it runs and records its
  result. A spawn that fails hands the job back (queued) for the next pass.
- A call outlives the container that spawned it. Whoever claims the job after
  its lease expired (a restarted `web`, or another container) asks the recorded
  call first (`FunctionCall.from_id(id).get(timeout=0)`): one still running is
  taken over, not spawned again; one that returned has its result recorded; only
  a call that died (crash, timeout, out of memory) is spawned again, up to
  DECODE_MAX_ATTEMPTS, then the issue is told, as with `decode serve`.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import modal
import modal.exception
from flask import Flask

from bot.config import Settings
from bot.core.errors import ConfigError
from bot.core.names import run_id
from bot.jobs.handler import Record, exhausted_reporter, job_handler, outcome_of
from bot.jobs.lease import LeaseRunner, Outcome, RunLost
from bot.jobs.queue_notes import QueueNotes
from bot.jobs.sqlite import open_store
from bot.jobs.store import JobRecord, JobStore
from bot.run.result import RunResult

log = logging.getLogger("decode.modal")

APP_NAME = "decode-bot"
# GITHUB_APP_ID, GITHUB_APP_PRIVATE_KEY, GITHUB_WEBHOOK_SECRET, ANTHROPIC_API_KEY, DECODE_DATABASE_URL
SECRET_NAME = "decode-bot"
NO_DATABASE = (f"the Modal app keeps its jobs in PostgreSQL: set DECODE_DATABASE_URL in the {SECRET_NAME} Modal "
               "Secret to a postgresql:// URL (user, password, host, database) that Modal's containers can reach")
WEB_MAX_CONTAINERS = 4  # each holds up to 64 requests and a dispatcher: bounds database connections and jobs
# What differs from a host's defaults; any of them can be overridden in the secret.
MODAL_DEFAULTS = {"SANDBOX_MODE": "modal", "DECODE_DATA_DIR": "/tmp/decode", "DECODE_WORKERS": "32"}
JOB_TIMEOUT_S = 2 * 3600  # DECODE_TIMEOUT_MINUTES (60) for the agent, plus clone, setup and publish
ROOT = Path(__file__).resolve().parent.parent


def settings_from(env: Mapping[str, str]) -> Settings:
    """Settings inside a Modal container: `MODAL_DEFAULTS`, then the environment (the secret) on top."""
    return Settings.from_env({**MODAL_DEFAULTS, **env})


class CallLost(RunLost):
    """A job's function call ended without an outcome: crash, timeout, out of memory, preemption."""


class FunctionCall(Protocol):
    """The part of `modal.FunctionCall` the dispatcher uses (`run_job.spawn` returns one)."""

    @property
    def object_id(self) -> str: ...

    def get(self, timeout: float | None = None) -> Any:
        """The call's return value; the builtin TimeoutError while it runs, another exception if it died."""


Spawn = Callable[[dict[str, Any]], FunctionCall]  # `run_job.spawn`
FromId = Callable[[str], FunctionCall]  # `modal.FunctionCall.from_id`


def ask(call: FunctionCall) -> dict | None:
    """`run_job`'s value once the call returned, None while it runs; `CallLost` if it died. Modal's
    ConnectionError (it could not be asked) propagates."""
    try:
        return call.get(timeout=0)
    except TimeoutError:  # the builtin one: no output yet
        return None
    except modal.exception.ConnectionError:
        raise
    except (Exception, modal.exception.InputCancellation) as e:  # noqa: BLE001 - run_job returns every job
        raise CallLost(f"{type(e).__name__}: {e}") from e  # error, so this is the call dying (or cancelled)


def recorded(value: dict, record: Record | None) -> Outcome:
    """The `Outcome` of the result `run_job` returned (`RunResult` as JSON); a run's result goes to `record`
    (the control app's /metrics), as `decode worker` records it. A call of an earlier deployment returned
    an earlier shape, which `RunResult.from_json` reads."""
    result = RunResult.from_json(value) or RunResult(run_id="", state="failed", error="the call returned no result")
    if record is not None and result.figures is not None:
        record(result)
    return outcome_of(result)


class CallRun:
    """A `RemoteRun` over a function call: polled with `ask`. A released job's call goes on; whoever claims
    the job next takes it over."""

    def __init__(self, call: FunctionCall, record: Record | None, value: dict | None = None) -> None:
        self.call = call
        self.call_id = call.object_id
        self.record = record
        self._value = value  # what the call already returned when it was taken over

    def poll(self) -> Outcome | None:
        value = self._value
        if value is None:
            try:
                value = ask(self.call)
            except modal.exception.ConnectionError:  # could not ask; ask again next sweep
                return None
        return None if value is None else recorded(value, self.record)

    def abandon(self) -> None:
        pass


class CallExecutor:
    """Starts each job as a call of `spawn`, and takes over a job's recorded call with `from_id`; a `Resumer`."""

    def __init__(self, spawn: Spawn, from_id: FromId, record: Record | None = None) -> None:
        self.spawn = spawn
        self.from_id = from_id
        self.record = record

    def start(self, job: JobRecord) -> CallRun:
        return CallRun(self.spawn(dataclasses.asdict(job)), self.record)

    def resume(self, job: JobRecord) -> CallRun | None:
        if job.call_id is None:
            return None
        call = self.from_id(job.call_id)
        try:
            value = ask(call)
        except CallLost:
            return None
        return CallRun(call, self.record, value)


def dispatcher(store: JobStore, spawn: Spawn, from_id: FromId, *, limit: int = 32, record: Record | None = None,
               on_exhausted: Callable[[JobRecord], None] | None = None, every_s: float = 2.0) -> LeaseRunner:
    """The lease runner of a `web` container: jobs run as calls of `spawn`; a job whose lease expired is first
    asked about through its recorded call (`from_id`)."""
    return LeaseRunner(store, CallExecutor(spawn, from_id, record), limit=limit, poll_s=every_s, name="dispatcher",
                       on_exhausted=on_exhausted)


def control(settings: Settings, *, spawn: Spawn, from_id: FromId, start: bool = True) -> Flask:
    """The webhook app of one `web` container over the PostgreSQL store at DECODE_DATABASE_URL (a ConfigError
    that says what to set without it), with its dispatcher thread when `start`."""
    from bot.github.auth import credentials_from
    from bot.github.forge import GitHubForge
    from bot.server import create_app
    from bot.server.context import app_context

    if not settings.store.database_url:
        raise ConfigError(NO_DATABASE)
    store = open_store(settings.store)
    app = create_app(settings, store)

    def report(job: JobRecord) -> None:
        exhausted_reporter(GitHubForge(credentials_from(settings.github)))(job)

    context = app_context(app)
    runner = dispatcher(store, spawn, from_id, limit=settings.pool.workers, record=context.metrics.record_run,
                        on_exhausted=report)
    context.runner = runner
    if start:
        runner.start()
        store.watch(runner.wake)  # a job another web container stored
        QueueNotes(store, GitHubForge(credentials_from(settings.github))).start()  # queued jobs say where they stand
    return app


# -- the Modal app ------------------------------------------------------------
# Building these objects talks to no server: Modal resolves names and builds the
# image when `modal deploy` runs.

app = modal.App(APP_NAME)
image = (
    modal.Image.debian_slim(python_version="3.11")
    .apt_install("git")
    .pip_install_from_pyproject(str(ROOT / "pyproject.toml"),
                                optional_dependencies=["server", "postgres", "modal"])
    .add_local_python_source("bot")  # this checkout's code, mounted at /root/bot
)
secret = modal.Secret.from_name(
    SECRET_NAME, required_keys=["GITHUB_WEBHOOK_SECRET", "ANTHROPIC_API_KEY", "DECODE_DATABASE_URL"])


@app.function(image=image, secrets=[secret], timeout=JOB_TIMEOUT_S, cpu=1.0, memory=2048)
def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """One job, with the handler of `decode worker`: the job's `RunResult` as JSON (the run's record.json,
    links and state included), already told on the issue."""
    from bot.github.auth import credentials_from
    from bot.github.forge import GitHubForge
    from bot.server.logs import configure_logging

    settings = settings_from(os.environ)
    redactor = settings.redactor
    configure_logging(redactor)
    try:
        outcome = job_handler(settings.job, GitHubForge(credentials_from(settings.github)))(JobRecord(**job))
    except Exception as e:  # noqa: BLE001 - the dispatcher records it as the job's failure
        log.exception("job %s failed", job.get("id"), extra={"job_id": job.get("id")})
        return RunResult(run_id(job["id"]), "failed", error=redactor.redact(str(e) or type(e).__name__),
                         exit_code=1).to_json()
    return outcome.result or RunResult(run_id(job["id"]), "failed", error=outcome.error, exit_code=1).to_json()


@app.function(image=image, secrets=[secret], min_containers=1, max_containers=WEB_MAX_CONTAINERS, timeout=60)
@modal.concurrent(max_inputs=64)
@modal.wsgi_app()
def web() -> Flask:
    """POST /webhook, GET /healthz, GET /metrics, and a dispatcher; one of up to `WEB_MAX_CONTAINERS`."""
    from bot.server.logs import configure_logging

    settings = settings_from(os.environ)
    configure_logging(settings.redactor)
    return control(settings, spawn=run_job.spawn, from_id=modal.FunctionCall.from_id)
