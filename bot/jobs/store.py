"""The job store's shape, shared by its two implementations.

`bot/jobs/sqlite.py` (SQLite, embedded, the default) and `bot/jobs/postgres.py`
(PostgreSQL, when DECODE_DATABASE_URL is set) both match `JobStore` without
inheriting from it; `bot.jobs.sqlite.open_store(settings.store)` picks one. The semantics are written down
once, here, and checked against both by one conformance suite (tests/jobs/test_store.py); the moves of the
job state machine are bot/jobs/transitions.py.

Jobs move queued -> running -> done | failed. A worker claims a job with a lease
and extends it by heartbeats; a job whose lease expired (its worker died) is
claimed again, up to `max_attempts` attempts, then `take_exhausted` fails it.
At most one job per key runs under a live lease. A run that did nothing and asks to run again later (GitHub
did not answer its first calls) is deferred (`defer`): it stays running, held by no one, until its lease ends
after the delay, and is then claimed again as its next attempt, like a job whose worker died.

Claims are fair across installations (`installation_of`: the App installation that delivered the job,
else its repository's owner): a claim takes, among the installations below their cap of running jobs
(`Caps.per_installation`, 0: none), the one whose last claim is the oldest (one never claimed first), and
its oldest job whose repository is below its cap (`Caps.per_repo`); a job over a cap waits, queued, while
the claim goes to the next. With two installations and work queued in both, claims alternate between them
whatever order the jobs came in. A queued job's comment says where it stands (`note`, bot/jobs/queue.py).

A job may run in a function call that outlives its worker (Modal's `run_job`):
the worker records the call's id (`record_call`), and whoever claims the job
next asks that call before starting the job again. So the claim of a job with a
recorded call is not an attempt, a call that replaces another is one, a release
keeps the call, and `take_exhausted` leaves such jobs to their claimer, which
knows whether the call still runs (bot/jobs/lease.py).

Deliveries are deduplicated twice. By delivery id: GitHub's own redeliveries
(automatic or from the App's settings page) keep the `X-GitHub-Delivery` id. By
body: a replay by someone who captured a signed delivery reuses its exact bytes
(any change breaks the signature) under a new id, so the SHA-256 of the raw body
is remembered in `bodies` and a second delivery with the same digest is a
duplicate. The body, not a payload field such as the comment id, is the
identity: it is what the signature covers, it needs no per-event rules, and two
genuine deliveries never share it (a label removed and added again changes
`updated_at`). Digests are kept for `BODY_RETENTION_S`; a body older than that
is refused before it reaches the store, by the times it carries (bot/server/intake.py).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from bot.core.errors import DecodeError

STATES = ("queued", "running", "done", "failed")
# GitHub lets a delivery be redelivered for 3 days
# (https://docs.github.com/en/webhooks/testing-and-troubleshooting-webhooks/redelivering-webhooks),
# so a week of delivery ids is enough to recognise every redelivery.
DELIVERY_RETENTION_S = 7 * 86400
BODY_RETENTION_S = 90 * 86400
PRUNE_EVERY_S = 3600.0


def check_final(state: str) -> None:
    """A ValueError unless `state` is one a job can finish in (`finish` takes done or failed)."""
    if state not in ("done", "failed"):
        raise ValueError(f"a job finishes as done or failed, not {state!r}")


def installation_of(key: str, payload: dict) -> str:
    """The installation a job counts against for the caps and the round-robin order: the App installation
    that delivered it (`payload["installation"]`, see `bot.github.work.job_payload`), else, for work no
    installation delivered (a token deployment, the CLI), the repository's owner."""
    installation = payload.get("installation") if isinstance(payload, dict) else None
    return str(installation) if installation is not None else key.partition("/")[0].lower()


def repo_of(key: str) -> str:
    """The repository ("owner/name", lower case) of a job key, for the per-repository cap."""
    return key.partition("#")[0].lower()


@dataclass(frozen=True)
class Caps:
    """How many jobs may run at once per installation and per repository (0: no cap); a job over a cap
    waits, queued, and the next runnable job is claimed instead."""

    per_installation: int = 0
    per_repo: int = 0


@dataclass(frozen=True)
class Snapshot:
    """What the queue's order and reasons are computed from (`bot.jobs.queue.line_up`): the queued jobs (or
    each installation's oldest few), the keys running under a live lease (with their installations), and
    when each installation with queued jobs last had a job claimed."""

    queued: list[JobRecord]
    running: list[tuple[str, str]]  # (key, installation)
    last_claimed: dict[str, float]


class StoreError(DecodeError):
    """The job store could not be read or written (locked too long, disk full, corrupt file, database down)."""


@dataclass(frozen=True)
class JobRecord:
    """One job as stored."""

    id: int
    delivery_id: str | None
    key: str  # "owner/repo#number": at most one running job per key
    payload: dict
    state: str  # queued | running | done | failed
    attempts: int
    created_at: float
    error: str | None = None
    result: dict | None = None
    call_id: str | None = None  # the function call that runs it (Modal's `FunctionCall.object_id`), once recorded
    installation: str = ""  # what it counts against for the caps and the round-robin order (`installation_of`)
    store_id: str = field(kw_only=True)  # the store that handed out `id`: with it, the job's run tag


class JobStore(Protocol):
    """Deliveries and jobs, durable, shared by every thread and process of a deployment."""

    lease_s: float  # how long a claim or heartbeat keeps a job
    store_id: str  # drawn once per store (bot/core/names.py): no other store tags its jobs alike
    max_attempts: int  # starts of one job before it is given up
    caps: Caps  # running jobs per installation and per repository

    @property
    def path(self) -> Path | str:
        """Where the store lives, for log lines: a file, or the database URL without its password."""
        ...

    def record_delivery(self, delivery_id: str, event: str, outcome: str,
                        job: tuple[str, dict] | None = None, *, digest: str | None = None) -> int | None | bool:
        """Remember the delivery (and body digest) and enqueue `job` in one durable transaction: False for a
        duplicate, else the new job id (None without a job)."""
        ...

    def claim(self, worker_id: str) -> JobRecord | None:
        """Take the next runnable job under a lease for `worker_id`, or None: of the installations under their
        cap, the one whose last claim is oldest (never claimed: first), its oldest job whose repository is under
        its cap. The claim of a job with a recorded call is not an attempt: the claimer asks that call first."""
        ...

    def snapshot(self, upto: int | None = None) -> Snapshot:
        """The queued jobs (oldest first; with `upto`, only each installation's oldest `upto`), the running ones
        and the last claim of each installation with queued jobs, read together by index probes: it costs
        what it returns, never a read of every run."""
        ...

    def note(self, job_id: int, text: str) -> bool:
        """Remember `text` as what the queued job's comment says; True only for the one caller that changed it
        (the job is still queued and said something else), which then tells GitHub."""
        ...

    def heartbeat(self, job_id: int, worker_id: str) -> bool:
        """Extend the lease of `worker_id` on the job; False if the lease was lost."""
        ...

    def finish(self, job_id: int, worker_id: str, state: str, *, result: dict | None = None,
               error: str | None = None) -> bool:
        """End a job `worker_id` holds as done or failed; False if the lease was lost."""
        ...

    def defer(self, job_id: int, worker_id: str, delay_s: float, error: str) -> bool:
        """Hand back a job `worker_id` holds whose run asked to run again later (`error` says why): no one
        holds it for `delay_s`, then it is claimed again as its next attempt. False if the lease was lost."""
        ...

    def record_call(self, job_id: int, worker_id: str, call_id: str) -> bool:
        """Remember the function call that runs the job `worker_id` holds, for whoever claims it next; a call
        that replaces another is an attempt. False if the lease was lost."""
        ...

    def watch(self, on_job: Callable[[], None]) -> None:
        """Call `on_job` soon after any process queues a job, so an idle runner need not wait for its poll
        (PostgreSQL: LISTEN/NOTIFY; SQLite: nothing, its processes share one host and poll it cheaply)."""
        ...

    def release(self, job_id: int, worker_id: str) -> None:
        """Give a held job back, queued, this attempt not counted (its recorded call, if any, is kept)."""
        ...

    def take_exhausted(self, worker_id: str) -> list[JobRecord]:
        """Fail and return the running jobs without a recorded call whose lease expired after max_attempts
        attempts."""
        ...

    def job(self, job_id: int) -> JobRecord:
        """The job with id `job_id`; KeyError if there is none."""
        ...

    def runs(self, limit: int = 200, *, repos: Collection[str] | None = None,
             state: str | None = None, before: int | None = None) -> list[JobRecord]:
        """The newest `limit` jobs older than job `before` (None: from the newest), newest first, optionally
        only of `repos` and in `state`; a page costs what it lists, not what the store holds."""
        ...

    def counts(self) -> dict[str, int]:
        """How many jobs are in each state; every state is present."""
        ...

    def take_write(self, account: str, horizon_s: float, decide: Callable[..., float]) -> float:
        """The GitHub write pacer's `Ledger.take_write` (bot/github/pacing.py), shared by every process on the
        store: one count of writes per account across workers and hosts."""
        ...

    def hold_writes(self, account: str, wait_s: float, slow_s: float) -> None:
        """The pacer's `Ledger.hold_writes`: GitHub asked `account`'s writes to wait, for every process."""
        ...

    def writable(self) -> bool:
        """True when a small durable write succeeds (for /healthz)."""
        ...

    def close(self) -> None:
        """Release the store's connections; it is unusable afterwards."""
        ...
