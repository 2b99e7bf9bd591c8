"""decode-bot on Modal, no host of yours: `modal deploy -m bot.modal_app`.

Two functions. `web` is the control container: the Flask webhook app
(`create_app`, unchanged intake) and the one job store, with a dispatcher: the
lease runner of `decode worker` (bot/lease.py) with function calls of `run_job`
in place of threads. `run_job` executes the same handler as `decode worker`
(SANDBOX_MODE=modal by default: the harness runs in the function, the agent's
tools in Modal sandboxes) and returns the run's figures with its result, so the
control app's /metrics counts them.

Durability. A Modal Volume is not a shared disk: a container sees other
containers' writes only after they `commit` and it `reload`s, and concurrent
commits of one file are last-write-wins
(modal.Volume's docstring: "not a good fit ... concurrent modifications to the
same file"). So SQLite never runs on the Volume and never has two writers:

- `web` is pinned to one container (`max_containers=1`, `min_containers=1`) and
  is the store's only writer. The SQLite file lives on its local disk (WAL and
  locking work as on a host); `SnapshotStore` copies a consistent image of it to
  the Volume with SQLite's backup API and commits the Volume. A delivery that
  makes a job is answered 202 only after that commit, and a new container starts
  from the last committed image.
- `run_job` never touches the store: it gets the job as an argument and returns
  its outcome. The dispatcher claims the job under the store's lease, spawns the
  call, heartbeats while it runs, and records its result. A spawn that fails
  hands the job back (queued) for the next pass; a call that dies (crash,
  timeout, out of memory) leaves its lease to expire, so the job is claimed
  again, up to DECODE_MAX_ATTEMPTS, then the issue is told, as with `decode serve`.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import modal
import modal.exception
from flask import Flask

from bot.config import Settings
from bot.jobs import Record, RunFigures, exhausted_reporter, job_handler, outcome_of
from bot.lease import LeaseRunner, Outcome, RunLost
from bot.store import Store
from bot.store_protocol import JobRecord, JobStore, StoreError

log = logging.getLogger("decode.modal")

APP_NAME = "decode-bot"
SECRET_NAME = "decode-bot"  # GITHUB_APP_ID, GITHUB_APP_PRIVATE_KEY, GITHUB_WEBHOOK_SECRET, ANTHROPIC_API_KEY
VOLUME_NAME = "decode-bot-state"
STATE_DIR = Path("/state")  # where `web` mounts the Volume
# What differs from a host's defaults; any of them can be overridden in the secret.
MODAL_DEFAULTS = {"SANDBOX_MODE": "modal", "DECODE_DATA_DIR": "/tmp/decode", "DECODE_WORKERS": "32"}
JOB_TIMEOUT_S = 2 * 3600  # DECODE_TIMEOUT_MINUTES (60) for the agent, plus clone, setup and publish
ROOT = Path(__file__).resolve().parent.parent


def settings_from(env: Mapping[str, str]) -> Settings:
    """Settings inside a Modal container: `MODAL_DEFAULTS`, then the environment (the secret) on top."""
    return Settings.from_env({**MODAL_DEFAULTS, **env})


class SnapshotStore(Store):
    """The job store on local disk, with its committed image kept on a Modal Volume.

    `snapshot` is the image's path on the mounted Volume and `commit` commits the
    Volume. A new store starts from the image. `record_delivery` returns a new job
    only once an image holding it is committed; concurrent callers share one image,
    as they share one SQLite transaction.
    """

    def __init__(self, path: Path, snapshot: Path, commit: Callable[[], None], **options: Any) -> None:
        path = Path(path)
        if snapshot.exists() and not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(snapshot, path)
        super().__init__(path, **options)
        self.snapshot = snapshot
        self._commit = commit
        self._snapshot_lock = threading.Lock()
        self._snapshot_started = 0  # monotonic ns at which the last committed image began

    def record_delivery(self, delivery_id: str, event: str, outcome: str,
                        job: tuple[str, dict] | None = None, *, digest: str | None = None) -> int | None | bool:
        value = super().record_delivery(delivery_id, event, outcome, job, digest=digest)
        if value is not None and value is not False:
            self.persist()
        return value

    def persist(self) -> None:
        """Commit an image of everything committed to the store so far; StoreError if the Volume refuses."""
        asked = time.monotonic_ns()
        with self._snapshot_lock:
            if self._snapshot_started > asked:  # an image begun after our write is already committed
                return
            started = time.monotonic_ns()
            tmp = self.snapshot.with_name(self.snapshot.name + ".tmp")
            try:
                self.snapshot.parent.mkdir(parents=True, exist_ok=True)
                source, target = sqlite3.connect(self.path), sqlite3.connect(tmp)
                try:
                    source.backup(target)
                finally:
                    target.close()
                    source.close()
                os.replace(tmp, self.snapshot)  # the Volume only ever holds a whole image
                self._commit()
            except Exception as e:  # noqa: BLE001 - whatever the Volume raised, the write is not durable
                raise StoreError(f"cannot save the job store to the Modal Volume {VOLUME_NAME}: {e}") from e
            self._snapshot_started = started


class CallLost(RunLost):
    """A job's function call ended without an outcome: crash, timeout, out of memory, preemption."""


class Call(Protocol):
    def poll(self) -> dict | None:
        """The call's return value (`run_job`'s) once it returned, None while it runs; `CallLost` if it died."""


Spawn = Callable[[JobRecord], Call]


def recorded(value: dict, record: Record | None) -> Outcome:
    """The `Outcome` of the job record `run_job` returned; its run figures go to `record` (the control
    app's /metrics), as `decode worker` records them."""
    if record is not None and (figures := RunFigures.of(value)) is not None:
        record(figures)
    return outcome_of(value)


class CallRun:
    """A `Run` over a `Call`. A released job's call is left to end on its own: its outcome is discarded."""

    def __init__(self, call: Call, record: Record | None) -> None:
        self.call = call
        self.record = record

    def poll(self) -> Outcome | None:
        value = self.call.poll()
        return None if value is None else recorded(value, self.record)

    def abandon(self) -> None:
        pass


class CallExecutor:
    """Starts each job as a function call with `spawn(job)`; an `Executor`."""

    def __init__(self, spawn: Spawn, record: Record | None = None) -> None:
        self.spawn = spawn
        self.record = record

    def start(self, job: JobRecord) -> CallRun:
        return CallRun(self.spawn(job), self.record)


def dispatcher(store: JobStore, spawn: Spawn, *, limit: int = 32, record: Record | None = None,
               on_exhausted: Callable[[JobRecord], None] | None = None, every_s: float = 2.0) -> LeaseRunner:
    """The lease runner of the control app: jobs run as calls of `spawn`, the store's image is committed
    after every sweep that changed it. The store's only writer, so it is the only runner."""
    persist = store.persist if isinstance(store, SnapshotStore) else None
    return LeaseRunner(store, CallExecutor(spawn, record), limit=limit, poll_s=every_s, name="dispatcher",
                       on_exhausted=on_exhausted, on_changed=persist)


def control(settings: Settings, *, state_dir: Path, commit: Callable[[], None], spawn: Spawn,
            start: bool = True) -> Flask:
    """The webhook app over a `SnapshotStore` in `state_dir`, with its dispatcher thread when `start`."""
    from bot.github.auth import credentials_from
    from bot.github.forge import GitHubForge
    from bot.server import create_app
    from bot.server.context import app_context

    store = SnapshotStore(settings.data_dir / "jobs.sqlite3", state_dir / "jobs.sqlite3", commit,
                          lease_s=settings.lease_s, max_attempts=settings.max_attempts)
    app = create_app(settings, store)

    def report(job: JobRecord) -> None:
        exhausted_reporter(GitHubForge(credentials_from(settings)))(job)

    context = app_context(app)
    runner = dispatcher(store, spawn, limit=settings.workers, record=context.metrics.record_run, on_exhausted=report)
    context.runner = runner
    if start:
        runner.start()
    return app


# -- the Modal app ------------------------------------------------------------
# Building these objects talks to no server: Modal resolves names and builds the
# image when `modal deploy` runs.

app = modal.App(APP_NAME)
image = (
    modal.Image.debian_slim(python_version="3.11")
    .apt_install("git")
    .pip_install_from_pyproject(str(ROOT / "pyproject.toml"))
    .add_local_python_source("bot")  # this checkout's code, mounted at /root/bot
)
secret = modal.Secret.from_name(SECRET_NAME, required_keys=["GITHUB_WEBHOOK_SECRET", "ANTHROPIC_API_KEY"])
volume = modal.Volume.from_name(VOLUME_NAME, create_if_missing=True)


class ModalCall:
    """A `Call` over a spawned `modal.FunctionCall`."""

    def __init__(self, call: modal.FunctionCall) -> None:
        self.call = call

    def poll(self) -> dict | None:
        try:
            return self.call.get(timeout=0)
        except TimeoutError:  # the builtin one: no output yet
            return None
        except modal.exception.ConnectionError:  # could not ask; ask again next sweep
            return None
        except Exception as e:  # noqa: BLE001 - run_job returns every job error, so this is the call dying
            raise CallLost(f"{type(e).__name__}: {e}") from e


@app.function(image=image, secrets=[secret], timeout=JOB_TIMEOUT_S, cpu=1.0, memory=2048)
def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """One job, with the handler of `decode worker`: the job's record (`Conclusion.record`: state, error,
    links, the run's figures), already told on the issue."""
    from bot.github.auth import credentials_from
    from bot.github.forge import GitHubForge
    from bot.server.logs import configure_logging

    settings = settings_from(os.environ)
    redactor = settings.redactor
    configure_logging(redactor)
    try:
        outcome = job_handler(settings, GitHubForge(credentials_from(settings)))(JobRecord(**job))
    except Exception as e:  # noqa: BLE001 - the dispatcher records it as the job's failure
        log.exception("job %s failed", job.get("id"), extra={"job_id": job.get("id")})
        return {"state": "failed", "error": redactor.redact(str(e) or type(e).__name__), "figures": None}
    return outcome.result or {"state": "failed", "error": outcome.error, "figures": None}


def spawn_job(job: JobRecord) -> Call:
    return ModalCall(run_job.spawn(dataclasses.asdict(job)))


@app.function(image=image, secrets=[secret], volumes={str(STATE_DIR): volume},
              min_containers=1, max_containers=1, timeout=60)
@modal.concurrent(max_inputs=64)
@modal.wsgi_app()
def web() -> Flask:
    """POST /webhook, GET /healthz, GET /metrics; the only writer of the job store."""
    from bot.server.logs import configure_logging

    settings = settings_from(os.environ)
    configure_logging(settings.redactor)
    return control(settings, state_dir=STATE_DIR, commit=volume.commit, spawn=spawn_job)
