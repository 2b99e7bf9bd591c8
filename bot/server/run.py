"""`decode serve` (intake + embedded workers) and `decode worker` (workers only).

Both drain the same SQLite store, so intake and workers can run as separate
processes on one host. SIGTERM stops claiming, lets running jobs finish for
`DECODE_SHUTDOWN_GRACE_SECONDS`, then hands unfinished ones back to the store
and removes their sandboxes; when they run again, they edit the tracking comment
they posted the first time.

Both check before taking work, and exit at once with the reason in one line:
the App key loads and GitHub takes it (`GET /app`), the port can be listened on
(exit 2: a setting to fix), GitHub answers at all (exit 1).
"""

from __future__ import annotations

import logging
from typing import Any

from bot.config import Settings
from bot.errors import ConfigError
from bot.github.auth import Credentials, credentials_from
from bot.github.forge import GitHubForge
from bot.jobs import exhausted_reporter, job_handler
from bot.lease import LeaseRunner
from bot.redact import Redactor
from bot.sandbox import SandboxSpec, prepare_host
from bot.sandbox.client import close_all
from bot.server.context import app_context
from bot.server.health import CredentialCheck
from bot.server.logs import configure_logging
from bot.server.metrics import Metrics
from bot.store import Store
from bot.worker import ThreadExecutor

log = logging.getLogger("decode.worker")


def ask_github(check: CredentialCheck) -> None:
    """Raise the error saying what to fix unless GitHub takes the credentials now."""
    if (error := check.error(fresh=True)) is not None:
        raise error


def listen(app: Any, host: str, port: int) -> Any:
    """A waitress server bound to host:port; a ConfigError naming the port when it cannot be."""
    import waitress

    from bot.server import MAX_BODY

    try:
        # waitress answers 413 from the headers (or, chunked, as soon as the count passes the limit),
        # before buffering the body; its check is `>=`, Flask's `>`, hence the + 1.
        return waitress.create_server(app, host=host, port=port, threads=8, ident="decode-bot",
                                      max_request_body_size=MAX_BODY + 1)
    except OSError as e:
        raise cannot_listen(host, port, e) from None


def cannot_listen(host: str, port: int, e: OSError) -> ConfigError:
    """The error of a port that cannot be listened on, saying what to change."""
    return ConfigError(f"cannot listen on {host}:{port}: {e.strerror or e}: stop what uses it or give "
                       "another --port/--host")


def start_pool(settings: Settings, store: Store, metrics: Metrics, size: int,
               credentials: Credentials) -> LeaseRunner:
    """The lease runner of this process: `size` jobs at a time on threads, their run figures in `metrics`."""
    forge = GitHubForge(credentials)
    prepare_host(settings.sandbox_mode, SandboxSpec(workspace=settings.data_dir, image=settings.sandbox_image))
    pool = LeaseRunner(store, ThreadExecutor(job_handler(settings, forge, metrics.record_run)), limit=size,
                       on_exhausted=exhausted_reporter(forge))
    pool.start()
    return pool


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
    """The webhook server (waitress) with an embedded worker pool, until SIGTERM."""
    from bot.server import create_app

    check_port(port)
    configure_logging(Redactor(settings.secrets()))
    check = CredentialCheck(credentials_from(settings), settings.health_recheck_s)  # the key loads
    store = Store(settings.data_dir / "jobs.sqlite3", lease_s=settings.lease_s, max_attempts=settings.max_attempts)
    try:
        app = create_app(settings, store, check)  # the webhook secret is set
        ask_github(check)  # only once the settings are complete, GitHub takes the credentials
        server = listen(app, host, port)
    except BaseException:
        store.close()
        raise
    pool = start_pool(settings, store, app_context(app).metrics, settings.workers, check.credentials)

    def stopped(released: list[int]) -> None:
        remove_sandboxes(released)
        close_server(server)

    pool.install_signal_handlers(settings.shutdown_grace_s, on_stopped=stopped)
    log.info("serving on http://%s:%s with %d workers", host, server.effective_port, settings.workers)
    try:
        server.run()
    finally:
        if not pool.stopping:  # waitress ended by itself, not by a signal
            remove_sandboxes(pool.stop(settings.shutdown_grace_s))
        server.task_dispatcher.shutdown()
        store.close()
    return 0


def close_server(server: Any) -> None:
    """End waitress's loop from any thread: its trigger runs the close on the loop's own thread, and
    `server.run()` returns once no socket is left."""
    from waitress import wasyncore

    server.trigger.pull_trigger(lambda: wasyncore.close_all(server._map))


def work(settings: Settings, host: str = "127.0.0.1", port: int | None = None) -> int:
    """Workers only, against the same store as `decode serve`, until SIGTERM; GET /metrics on host:port
    when a port is given."""
    from prometheus_client import start_http_server

    if port is not None:
        check_port(port)
    configure_logging(Redactor(settings.secrets()))
    check = CredentialCheck(credentials_from(settings), settings.health_recheck_s)
    ask_github(check)
    store = Store(settings.data_dir / "jobs.sqlite3", lease_s=settings.lease_s, max_attempts=settings.max_attempts)
    metrics = Metrics(store.counts)
    if port is not None:
        try:
            start_http_server(port, addr=host, registry=metrics.registry)
        except OSError as e:
            store.close()
            raise cannot_listen(host, port, e) from None
    pool = start_pool(settings, store, metrics, settings.workers, check.credentials)
    pool.install_signal_handlers(settings.shutdown_grace_s, on_stopped=remove_sandboxes)
    log.info("worker running with %d workers", settings.workers)
    pool.wait_stopped()
    store.close()
    return 0
