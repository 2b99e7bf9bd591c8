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
import signal
import threading
from collections.abc import Callable
from typing import Any

from bot.config import Settings
from bot.errors import ConfigError, DecodeError
from bot.github.auth import Credentials, credentials_from
from bot.github.forge import Forge, GitHubForge
from bot.github.job import marker, run_github_job
from bot.redact import Redactor
from bot.sandbox.client import close_all
from bot.server.logs import configure_logging
from bot.server.health import CredentialCheck
from bot.server.metrics import Metrics
from bot.store import JobRecord, Store
from bot.triggers import trigger_of
from bot.worker import WorkerPool

log = logging.getLogger("decode.worker")


def run_id_of(job: JobRecord) -> str:
    """Stable across attempts, so a retried job finds the comments and branch of the last one."""
    return f"job-{job.id}"


def job_handler(settings: Settings, forge: Forge, metrics: Metrics | None = None) -> Callable[[JobRecord], dict]:
    """What a worker does with a claimed job: the GitHub job, with metrics and logs keyed by job id."""

    def handle(job: JobRecord) -> dict[str, Any]:
        trigger = trigger_of(job.payload)
        extra = {"job_id": job.id, "delivery_id": job.delivery_id}
        log.info("job %s: %s on %s#%s (attempt %d)", job.id, trigger.kind, trigger.repo, trigger.number,
                 job.attempts, extra=extra)
        conclusion = run_github_job(trigger, settings, forge, run_id=run_id_of(job), attempt=job.attempts,
                                    progress=lambda line: log.info(line, extra=extra))
        outcome = conclusion.outcome
        if metrics is not None and outcome is not None:
            r = outcome.result
            metrics.run_seconds.labels(conclusion.state).observe(r.wall_s)
            for kind, value in (("input", r.usage.input_tokens), ("output", r.usage.output_tokens),
                                ("cache_read", r.usage.cache_read_tokens),
                                ("cache_write", r.usage.cache_creation_tokens)):
                metrics.tokens.labels(kind).inc(value)
            metrics.cost.inc(r.cost_usd)
        log.info("job %s: %s %s", job.id, conclusion.state, conclusion.pr_url or "", extra=extra)
        if conclusion.state == "failed":
            raise DecodeError(conclusion.message)
        return {"state": conclusion.state, "pr_url": conclusion.pr_url, "branch": conclusion.branch}

    return handle


def exhausted_reporter(forge: Forge) -> Callable[[JobRecord], None]:
    """Tell the issue that a job was given up on after its worker died on every attempt."""

    def report(job: JobRecord) -> None:
        trigger = trigger_of(job.payload)
        log.error("job %s: %s", job.id, job.error, extra={"job_id": job.id})
        if trigger.number is None:
            return
        tag = marker("run", run_id_of(job))
        text = (f"❌ decode-bot gave up on this after {job.attempts} attempts: the worker stopped each time "
                f"(crash, restart or out of memory). Comment again to retry.\n\n{tag}")
        existing = forge.find_comment(trigger.repo, trigger.number, tag)
        if existing is None:
            forge.post_comment(trigger.repo, trigger.number, text, tag)
        else:
            forge.edit_comment(trigger.repo, existing, text)

    return report


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
        raise ConfigError(f"cannot listen on {host}:{port}: {e.strerror or e}: stop what uses it or give "
                          "another --port/--host") from None


def start_pool(settings: Settings, store: Store, metrics: Metrics | None, size: int,
               credentials: Credentials) -> WorkerPool:
    forge = GitHubForge(credentials)
    if settings.sandbox_mode == "docker":  # containers of a crashed predecessor on this host
        from bot.sandbox.docker import remove_leftovers

        if removed := remove_leftovers():
            log.info("removed %d sandbox containers left by dead processes", len(removed))
    if settings.sandbox_mode == "modal":  # fill DECODE_POOL_SIZE warm sandboxes before the first job
        from bot.sandbox import SandboxSpec
        from bot.sandbox.modal import pool_size, prewarm

        if pool_size():
            prewarm(SandboxSpec(workspace=settings.data_dir, image=settings.sandbox_image))
    pool = WorkerPool(store, job_handler(settings, forge, metrics), size=size,
                      on_exhausted=exhausted_reporter(forge))
    pool.start()
    return pool


def stop_pool(pool: WorkerPool, settings: Settings) -> None:
    """Stop `pool` (running jobs get the grace period, the rest are released to run again), then remove the
    sandboxes the released jobs still hold: the process is about to exit, and its containers (or Modal
    sandboxes) would outlive it."""
    released = pool.stop(settings.shutdown_grace_s)
    closed = close_all()
    if released or closed:
        log.info("released %d running jobs and removed %d sandboxes", len(released), closed)


def _on_signals(stop: Callable[[], None]) -> None:
    def handler(signum: int, frame: object) -> None:
        log.info("received %s: stopping", signal.Signals(signum).name)
        threading.Thread(target=stop, daemon=True).start()
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def serve(settings: Settings, host: str, port: int) -> int:
    """The webhook server (waitress) with an embedded worker pool, until SIGTERM."""
    from bot.server import create_app

    if not 1 <= port <= 65535:
        raise ConfigError(f"--port {port} is not a port: give one from 1 to 65535")
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
    pool = start_pool(settings, store, app.extensions["decode"]["metrics"], settings.workers, check.credentials)
    log.info("serving on http://%s:%s with %d workers", host, server.effective_port, settings.workers)

    def interrupt(signum: int, frame: object) -> None:
        log.info("received %s: stopping", signal.Signals(signum).name)
        raise KeyboardInterrupt  # ends waitress's loop in the main thread; it stops its own threads

    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, interrupt)
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        stop_pool(pool, settings)
        store.close()
    return 0


def work(settings: Settings) -> int:
    """Workers only, against the same store as `decode serve`, until SIGTERM."""
    configure_logging(Redactor(settings.secrets()))
    check = CredentialCheck(credentials_from(settings), settings.health_recheck_s)
    ask_github(check)
    credentials = check.credentials
    store = Store(settings.data_dir / "jobs.sqlite3", lease_s=settings.lease_s, max_attempts=settings.max_attempts)
    pool = start_pool(settings, store, None, settings.workers, credentials)
    done = threading.Event()

    def stop() -> None:
        stop_pool(pool, settings)
        done.set()

    _on_signals(stop)
    log.info("worker running with %d workers", settings.workers)
    done.wait()
    return 0
