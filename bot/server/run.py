"""`decode serve` (intake + embedded workers) and `decode worker` (workers only).

Both drain the same SQLite store, so intake and workers can run as separate
processes on one host. SIGTERM stops claiming, lets running jobs finish for
`DECODE_SHUTDOWN_GRACE_SECONDS`, then hands unfinished ones back to the store
and removes their sandboxes; when they run again, they edit the tracking comment
they posted the first time.

Both run as the App in DECODE_DATA_DIR/app.json when the environment sets no App credentials
(bot/github/app_credentials.py); `decode serve` without any starts in setup mode (bot/server/setup.py).
As an App, `decode serve` also asks GitHub again for the deliveries it could not take while it was down
(bot/github/redeliver.py).
Both check before taking work, and exit at once with the reason in one line:
the App key loads and GitHub takes it (`GET /app`), the port can be listened on
(exit 2: a setting to fix), GitHub answers at all (exit 1).

Both also check the model at start, as `decode run` does (`bot.server.health.model_check`), but a
failed model check does not stop them: the key may be fixed where it is kept (a secret store, the
API's console) without a restart, and the intake keeps storing deliveries meanwhile. Until the check
passes the log says why, /healthz answers 503 naming ANTHROPIC_API_KEY or DECODE_MODEL, and the
jobs wait in the store instead of failing on their issues; it is asked again every
`DECODE_HEALTH_RECHECK_SECONDS`.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from typing import Any

from bot.config import ModelSettings, PoolSettings, Settings
from bot.core.errors import ConfigError
from bot.github.auth import AppCredentials, Credentials, credentials_from
from bot.github.forge import GitHubForge
from bot.github.pacing import WritePacer
from bot.github.redeliver import Redelivery
from bot.jobs.handler import exhausted_reporter, job_handler
from bot.jobs.lease import LeaseRunner
from bot.jobs.queue_notes import QueueNotes
from bot.model import Model, shared_model
from bot.sandbox import close_all, prepare_host
from bot.server.context import AppContext, app_context
from bot.server.health import Recheck, model_check
from bot.server.logs import PLAIN, configure_logging
from bot.server.metrics import Metrics, guarded_app
from bot.server.setup import address, announce, flow_of
from bot.server.shutdown import on_shutdown
from bot.jobs.sqlite import open_store
from bot.jobs.store import JobStore
from bot.jobs.worker import ThreadExecutor
from bot.sandbox import sandbox_spec

log = logging.getLogger("decode.worker")


def ask_github(credentials: Credentials, every_s: float) -> Recheck:
    """The check /healthz asks of `credentials` (again at most every `every_s`); it raises the error saying what
    to fix unless GitHub takes them now."""
    check = Recheck(credentials.check, every_s)
    if (error := check.now()) is not None:
        raise error
    return check


class ModelGate:
    """The process's shared model and its check (None for a scripted session), asked once at start."""

    def __init__(self, model: ModelSettings, every_s: float) -> None:
        self.model: Model | None = shared_model(model)
        self.check = model_check(model, self.model, every_s)
        if self.check is not None:  # asked on a thread of its own: an unreachable API must not keep the
            self.check.error()      # server from taking deliveries; jobs wait for its first answer (`hold`)


def listen(app: Any, host: str, port: int) -> Any:
    """A waitress server bound to host:port; a ConfigError naming the port when it cannot be."""
    from waitress.server import create_server

    from bot.server import MAX_BODY

    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)  # waitress's own lookup fails as a bare ValueError
    except socket.gaierror as e:
        raise ConfigError(f"--host {host}: {e.strerror}: give an address of this machine (127.0.0.1, 0.0.0.0, ::) "
                          "or a name that resolves to one") from None
    try:
        # waitress answers 413 from the headers (or, chunked, as soon as the count passes the limit),
        # before buffering the body; its check is `>=`, Flask's `>`, hence the + 1.
        return create_server(app, host=host, port=port, threads=8, ident="decode-bot",
                             max_request_body_size=MAX_BODY + 1)
    except OSError as e:
        raise cannot_listen(host, port, e) from None


def cannot_listen(host: str, port: int, e: OSError) -> ConfigError:
    """The error of a port that cannot be listened on, saying what to change."""
    return ConfigError(f"cannot listen on {host}:{port}: {e.strerror or e}: stop what uses it or give "
                       "another --port/--host")


def start_pool(settings: Settings, store: JobStore, metrics: Metrics, size: int,
               credentials: Credentials, gate: ModelGate) -> LeaseRunner:
    """The lease runner of this process: `size` jobs at a time on threads, their run figures in `metrics`;
    it claims nothing while the model's check fails. Its writes to GitHub are paced in `store`, with every
    other process's on it."""
    forge = GitHubForge(credentials, pacer=WritePacer.per_minute(settings.github.writes_per_minute, ledger=store))
    prepare_host(settings.sandbox.mode, sandbox_spec(settings.sandbox, settings.store.data_dir))
    handle = job_handler(settings.job, forge, metrics.record_run, model=gate.model)
    pool = LeaseRunner(store, ThreadExecutor(handle), limit=size, on_exhausted=exhausted_reporter(forge),
                       hold=gate.check.hold if gate.check is not None else None)
    pool.start()
    QueueNotes(store, forge).start()  # queued jobs' comments say where they stand, on a thread of their own
    store.watch(pool.wake)  # a job another process queued (PostgreSQL) starts at once, not at the next poll
    return pool


def stop_runner(runner: LeaseRunner, grace_s: float, name: str,
                on_stopped: Callable[[list[int]], None] | None = None) -> None:
    """The graceful stop of `runner` for signal `name`: its running jobs get `grace_s` to finish, the rest are
    released; then `on_stopped(released job ids)`."""
    log.info("%s: stopping, running jobs get %.0f s to finish", name, grace_s)
    runner.stop(grace_s, on_stopped)


def remove_sandboxes(released: list[int]) -> None:
    """Once the pool stopped (running jobs got the grace period, the rest were released to run again), remove
    the sandboxes the released jobs still hold: the process is about to exit, and its containers (or Modal
    sandboxes) would outlive it."""
    closed = close_all()
    if released or closed:
        log.info("released %d running jobs and removed %d sandboxes", len(released), closed)


def check_port(port: int) -> None:
    """A ConfigError unless `port` is a TCP port."""
    if not 1 <= port <= 65535:
        raise ConfigError(f"--port {port} is not a port: give one from 1 to 65535")


def serve(settings: Settings, host: str, port: int) -> int:
    """The webhook server (waitress) with an embedded worker pool, until SIGTERM (exit 0) or SIGINT (130).
    Without App credentials it starts in setup mode: /setup creates the App, then the pool starts (docs/setup.md)."""
    from bot.server import create_app

    check_port(port)
    configure_logging(settings.redactor)
    credentials = credentials_from(settings.github) if settings.github.has_credentials else None
    store = open_store(settings.store)
    pool = Pool(store, settings.pool)
    try:
        app = create_app(settings, store, on_configured=pool.configure)
        pool.context = app_context(app)
        pool.context.bind = host  # /metrics answers without its token only on a loopback bind
        if credentials is not None:  # only once the settings are complete, GitHub takes the credentials
            pool.context.credentials = ask_github(credentials, settings.web.health_recheck_s)
        server = listen(app, host, port)
        pool.gate = ModelGate(settings.model, settings.web.health_recheck_s)  # after the port: a busy port is told at once
        pool.context.model = pool.gate.check
    except BaseException:
        store.close()
        raise
    if credentials is not None:
        pool.start(settings, credentials)

    def stopped(released: list[int]) -> None:
        remove_sandboxes(released)
        close_server(server)

    signalled = on_shutdown(lambda name: pool.shutdown(name, stopped))
    if credentials is not None:
        log.info("serving on %s with %d workers", address(host, server.effective_port), settings.pool.workers)
    else:  # a link to copy: a plain line, not JSON
        log.warning("%s", announce(settings.web.public_url, host, server.effective_port, flow_of(app).key), extra={PLAIN: True})
    try:
        server.run()
    finally:
        pool.stop_unless_stopping()
        server.task_dispatcher.shutdown()
        store.close()
    return signalled.exit_code


class Pool:
    """The worker pool of `decode serve`: started at once with App credentials, or by /setup once it has
    created the App (from a request thread, so the signal handlers are installed before it exists); `part` says how
    many workers it runs and how long a stop waits for them."""

    def __init__(self, store: JobStore, part: PoolSettings) -> None:
        self.store = store
        self.part = part
        self.context: AppContext | None = None  # the webhook app's: its metrics, and where the runner is set
        self.gate: ModelGate | None = None  # the model and its check, made before the server listens
        self.runner: LeaseRunner | None = None
        self.redelivery: Redelivery | None = None  # the App's failed deliveries, asked for again
        self.closed = False
        self._lock = threading.Lock()  # a start and a shutdown never cross: a shutdown sees the runner or none

    def start(self, settings: Settings, credentials: Credentials) -> None:
        """Start the lease runner and, as an App, the redelivery of its failed deliveries (once each); a
        ConfigError when the server is already shutting down."""
        assert self.context is not None and self.gate is not None
        with self._lock:
            if self.closed:
                raise ConfigError("decode serve is shutting down: the App is saved; start it again to run as it")
            if self.redelivery is None and isinstance(credentials, AppCredentials):
                self.redelivery = Redelivery(credentials)
                self.redelivery.start()
            if self.runner is None and self.part.workers == 0:
                log.info("intake only (DECODE_WORKERS=0): the jobs are run by decode worker processes on this store")
            elif self.runner is None:
                self.runner = start_pool(settings, self.store, self.context.metrics, self.part.workers,
                                         credentials, self.gate)
                self.context.runner = self.runner  # the intake wakes it for each job it queues

    def configure(self, settings: Settings) -> None:
        """Run as the App /setup created: its secrets redacted, GitHub asked once, /healthz checking it,
        the workers started."""
        assert self.context is not None
        configure_logging(settings.redactor)
        credentials = credentials_from(settings.github)
        self.context.credentials = ask_github(credentials, settings.web.health_recheck_s)
        self.start(settings, credentials)

    def shutdown(self, name: str, on_stopped: Callable[[list[int]], None]) -> None:
        """The stop for signal `name` (bot/server/shutdown.py): the runner's graceful stop, or, before /setup
        started one, the end of setup mode (and no runner starts after it)."""
        with self._lock:
            self.closed = self.runner is None
        if self.redelivery is not None:
            self.redelivery.stop()
        if self.runner is not None:
            stop_runner(self.runner, self.part.shutdown_grace_s, name, on_stopped)
            return
        log.info("%s: stopping (no jobs run in this process)", name)
        on_stopped([])

    def stop_unless_stopping(self) -> None:
        """When waitress ended by itself, not by a signal: stop the runner and remove its sandboxes."""
        with self._lock:
            self.closed = True
        if self.runner is not None and not self.runner.stopping:
            remove_sandboxes(self.runner.stop(self.part.shutdown_grace_s))


def close_server(server: Any) -> None:
    """End waitress's loop from any thread: the requests it is serving finish first (up to 5 s, as waitress's own
    `close` waits: their answers go out through the trigger), then the trigger runs the close on the loop's own
    thread, and `server.run()` returns once no socket is left."""
    from waitress import wasyncore

    server.task_dispatcher.shutdown()
    try:
        server.trigger.pull_trigger(lambda: wasyncore.close_all(server._map))
    except OSError:  # the trigger is closed: the loop has already ended (a second signal, or run() returned)
        log.debug("the server was already closed")


def work(settings: Settings, host: str = "127.0.0.1", port: int | None = None) -> int:
    """Workers only, against the same store as `decode serve`, until SIGTERM (exit 0) or SIGINT (130); GET
    /metrics on host:port when a port is given."""
    if port is not None:
        check_port(port)
    configure_logging(settings.redactor)
    if not settings.github.has_credentials:
        raise ConfigError("no GitHub App yet: finish setup at /setup of `decode serve` (it keeps the App in "
                          "DECODE_DATA_DIR/app.json, which decode worker reads too), or set GITHUB_APP_ID and "
                          "GITHUB_APP_PRIVATE_KEY")
    if settings.pool.workers == 0:
        raise ConfigError("DECODE_WORKERS=0 leaves decode worker nothing to do: set it to how many jobs it runs "
                          "at once (0 is for an intake-only decode serve)")
    credentials = credentials_from(settings.github)
    ask_github(credentials, settings.web.health_recheck_s)
    gate = ModelGate(settings.model, settings.web.health_recheck_s)
    store = open_store(settings.store)
    metrics = Metrics(store.counts)
    if port is not None:
        try:
            scrape = listen(guarded_app(metrics.registry, settings.web.metrics_token, host), host, port)
        except ConfigError:
            store.close()
            raise
        threading.Thread(target=scrape.run, name="metrics", daemon=True).start()
    pool = start_pool(settings, store, metrics, settings.pool.workers, credentials, gate)
    signalled = on_shutdown(lambda name: stop_runner(pool, settings.pool.shutdown_grace_s, name, remove_sandboxes))
    log.info("worker running with %d workers", settings.pool.workers)
    pool.wait_stopped()
    store.close()
    return signalled.exit_code
