"""The durable job store: deliveries and jobs in one embedded SQLite file.

The default `JobStore` (bot/jobs/store.py, whose docstring defines the semantics of both); with
DECODE_DATABASE_URL set, `open_store` opens bot/jobs/postgres.py instead.

WAL mode with `synchronous=FULL`: a call that wrote returns only after its
commit reached the disk, so an acknowledged delivery survives SIGKILL and power
loss. Several processes (`decode serve`, `decode worker`) may share the file;
every write takes SQLite's write lock up front (`BEGIN IMMEDIATE`) and waits for
it up to `busy_timeout`.

Within a process all threads share one writing connection behind a lock: measured
faster than one connection per thread, whose contention goes through SQLite's
sleeping busy handler (latency spikes to hundreds of ms under load). Concurrent
`record_delivery` calls are group-committed: whichever caller holds the lock
writes every pending delivery in one transaction, and each caller returns only
after that commit.

The schema is `_SCHEMA` (`CREATE ... IF NOT EXISTS`: a file written before
versioning gains its missing tables) and then the versioned `MIGRATIONS`, applied
at open under the write lock and counted in SQLite's `user_version`; a file of a
newer version is refused. The first open draws the store's `store_id` (bot/core/names.py), which every
`JobRecord` carries: job ids restart at 1 in a new store, the store id keeps their run tags apart.
"""

from __future__ import annotations

import heapq
import itertools
import json
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.config import StoreSettings
from bot.core.extras import requires_extra
from bot.core.names import new_store_id
from bot.jobs.sqlite_sql import (CLAIM, COLUMNS, FAILED_COUNT, MIGRATIONS, OPEN_COUNTS, QUEUED_OF, REPO_RUN_IDS,
                                 RUNNABLE, RUNS_PAGE, SCHEMA, TURNS)
from bot.github.pacing import Decide
from bot.jobs import write_ledger
from bot.jobs.transitions import MOVES
from bot.jobs.store import (BODY_RETENTION_S, DELIVERY_RETENTION_S, PRUNE_EVERY_S, STATES, Caps, JobRecord,
                            JobStore, Snapshot, StoreError, check_final, installation_of)

__all__ = ["BODY_RETENTION_S", "DELIVERY_RETENTION_S", "MIGRATIONS", "STATES", "JobRecord", "JobStore", "Store",
           "StoreError", "open_store"]

LIVE = ("queued", "running")  # the states jobs_open holds


class _NewerSchema(StoreError):
    """The file was written by a newer decode-bot."""


@dataclass
class _Delivery:
    """One `record_delivery` call waiting for a group commit."""

    delivery_id: str
    event: str
    outcome: str
    key: str | None
    payload: str | None
    digest: str | None = None
    installation: str = ""
    value: int | None | bool = None
    error: str | None = None
    done: bool = False


def open_store(store: StoreSettings) -> JobStore:
    """The store of these settings, with their lease and attempts: PostgreSQL at DECODE_DATABASE_URL when set,
    else the SQLite file DECODE_DATA_DIR/jobs.sqlite3, with the caps of DECODE_MAX_RUNNING_PER_INSTALLATION and
    DECODE_MAX_RUNNING_PER_REPO. The one place a process opens its store (serve,
    worker, the webhook app's default)."""
    caps = Caps(store.max_running_per_installation, store.max_running_per_repo)
    if store.database_url:
        with requires_extra("postgres", "DECODE_DATABASE_URL"):  # psycopg: only for deployments that use it
            from bot.jobs.postgres import PostgresStore

        return PostgresStore(store.database_url, lease_s=store.lease_s, max_attempts=store.max_attempts,
                             caps=caps)
    return Store(store.data_dir / "jobs.sqlite3", lease_s=store.lease_s, max_attempts=store.max_attempts,
                 caps=caps)


class Store:
    """Deliveries and jobs in the SQLite file at `path`; safe across threads and processes (a `JobStore`)."""

    def __init__(self, path: Path, *, lease_s: float = 60.0, max_attempts: int = 3, caps: Caps = Caps(),
                 busy_timeout_s: float = 10.0) -> None:
        self.path = Path(path)
        self.lease_s = lease_s
        self.max_attempts = max_attempts
        self.caps = caps
        self._lock = threading.Lock()  # guards the writing connection
        self._read_lock = threading.Lock()
        self._pending: list[_Delivery] = []
        self._pending_lock = threading.Lock()
        self._last_prune = 0.0
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # the data dir: private
            self._db = sqlite3.connect(self.path, timeout=busy_timeout_s, isolation_level=None,
                                       check_same_thread=False)
            self._db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
            mode = self._db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if mode.lower() != "wal":
                raise StoreError(f"the job store {self.path} cannot use WAL mode (got {mode!r}): "
                                 "put DECODE_DATA_DIR on a local filesystem")
            self._db.execute("PRAGMA synchronous = FULL")
            with self._tx():
                for statement in filter(str.strip, SCHEMA.split(";")):
                    self._db.execute(statement)
                self._migrate()
                self.store_id = self._identity()
            # Reads (job, counts) get their own connection: a WAL reader never waits for
            # a writer, so a slow /metrics scrape does not hold up acknowledgements.
            self._reader = sqlite3.connect(self.path, timeout=busy_timeout_s, isolation_level=None,
                                           check_same_thread=False)
            self._reader.execute("PRAGMA query_only = ON")
        except _NewerSchema as e:
            raise StoreError(f"cannot open the job store {self.path}: {e}") from None
        except (OSError, sqlite3.Error, StoreError) as e:
            raise StoreError(f"cannot open the job store {self.path}: {e}: "
                             "check that DECODE_DATA_DIR is a writable local directory") from None

    def _migrate(self) -> None:
        """Apply the `MIGRATIONS` the file lacks; in the open's write transaction, so a process that opens the
        file at the same moment waits and then finds them applied."""
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > len(MIGRATIONS):
            raise _NewerSchema(f"it holds schema version {version}, newer than this decode-bot knows "
                             f"({len(MIGRATIONS)}): run the newer version")
        for number, sql in enumerate(MIGRATIONS[version:], start=version + 1):
            self._db.execute(sql)
            self._db.execute(f"PRAGMA user_version = {number}")

    def _identity(self) -> str:
        """The store id: drawn by the first open of the file, in its write transaction; read by every later one."""
        self._db.execute("INSERT INTO store (one, id) VALUES (1, ?) ON CONFLICT (one) DO NOTHING", (new_store_id(),))
        return self._db.execute("SELECT id FROM store").fetchone()[0]

    # -- intake -----------------------------------------------------------

    def record_delivery(self, delivery_id: str, event: str, outcome: str,
                        job: tuple[str, dict] | None = None, *, digest: str | None = None) -> int | None | bool:
        """In ONE transaction: remember the delivery id (and the body `digest`, when given); when `job`
        (key, payload) is given, enqueue it.

        Returns False if this delivery id or this digest was already recorded (nothing
        written: a GitHub redelivery, or a replayed body), else the new job id (or None
        when no job). Returns only after the commit is durable.
        """
        key, payload = job if job is not None else (None, None)
        request = _Delivery(delivery_id, event, outcome, key,
                            None if job is None else json.dumps(payload, separators=(",", ":")), digest,
                            "" if job is None else installation_of(*job))
        with self._pending_lock:
            self._pending.append(request)
        with self._lock:
            # Whoever held the lock before us either wrote our request and committed,
            # or left it pending: then we write it, with everyone else's pending ones.
            if not request.done:
                with self._pending_lock:
                    batch, self._pending = self._pending, []
                self._write_deliveries(batch)
        if request.error is not None:
            raise StoreError(request.error)
        return request.value

    def _write_deliveries(self, batch: list[_Delivery]) -> None:
        try:
            with self._tx():
                for request in batch:
                    request.value = self._insert_delivery(request)
                self._maybe_prune()
        except BaseException as e:  # payloads were encoded by their callers: only the store can fail here
            for request in batch:
                request.error = str(e) or type(e).__name__
            if not isinstance(e, StoreError):
                raise
        finally:
            for request in batch:
                request.done = True

    def _insert_delivery(self, r: _Delivery) -> int | None | bool:
        now = time.time()
        if r.digest is not None and self._db.execute("SELECT 1 FROM bodies WHERE digest = ?",
                                                     (r.digest,)).fetchone():
            return False
        inserted = self._db.execute(
            "INSERT INTO deliveries (id, event, outcome, received_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (id) DO NOTHING", (r.delivery_id, r.event, r.outcome, now)).rowcount
        if not inserted:
            return False
        if r.digest is not None:
            self._db.execute("INSERT INTO bodies (digest, delivery_id, received_at) VALUES (?, ?, ?)",
                             (r.digest, r.delivery_id, now))
        if r.key is None:
            return None
        return self._db.execute(
            "INSERT INTO jobs (delivery_id, key, payload, state, created_at, updated_at, installation) "
            "VALUES (?, ?, ?, 'queued', ?, ?, ?) RETURNING id",
            (r.delivery_id, r.key, r.payload, now, now, r.installation)).fetchone()[0]

    def _maybe_prune(self) -> None:
        now = time.time()
        if now - self._last_prune >= PRUNE_EVERY_S:
            self._db.execute("DELETE FROM deliveries WHERE received_at < ?", (now - DELIVERY_RETENTION_S,))
            self._db.execute("DELETE FROM bodies WHERE received_at < ?", (now - BODY_RETENTION_S,))
            self._last_prune = now

    # -- workers ----------------------------------------------------------

    def claim(self, worker_id: str) -> JobRecord | None:
        """Atomically take the next runnable job for `worker_id` (in the fair order of this module's
        docstring), or None.

        Runnable: queued, or running under an expired lease (its worker died) with
        attempts < max_attempts or a recorded call; never a job whose key has another
        job running under a live lease, nor one whose installation or repository is at its cap.
        The job becomes running, leased to `worker_id` for `lease_s`, with attempts + 1 unless it
        has a recorded call.
        """
        now = time.time()
        params = {"worker": worker_id, "now": now, "expires": now + self.lease_s, "max_attempts": self.max_attempts,
                  "per_installation": self.caps.per_installation, "per_repo": self.caps.per_repo}
        with self._lock:
            with self._errors():  # a read first: idle polling never takes the write lock
                if self._db.execute(RUNNABLE, params).fetchone() is None:
                    return None
            with self._tx():
                row = self._db.execute(CLAIM, params).fetchone()
        return _record(row, self.store_id) if row else None

    def heartbeat(self, job_id: int, worker_id: str) -> bool:
        """Extend the lease of `worker_id` on the job; False if the lease was lost."""
        return self._move("heartbeat", job=job_id, worker=worker_id)

    def finish(self, job_id: int, worker_id: str, state: str, *, result: dict | None = None,
               error: str | None = None) -> bool:
        """End a job `worker_id` holds as `state` (done or failed); False if the lease was lost."""
        check_final(state)
        return self._move("finish", job=job_id, worker=worker_id, state=state, error=error,
                          result=None if result is None else json.dumps(result))

    def record_call(self, job_id: int, worker_id: str, call_id: str) -> bool:
        """Remember the call that runs the job `worker_id` holds; one that replaces another call is an attempt
        (the job was started again). False if the lease was lost."""
        return self._move("record_call", job=job_id, worker=worker_id, call=call_id)

    def watch(self, on_job: Callable[[], None]) -> None:
        """Nothing: processes sharing a SQLite file are on one host and find new jobs at their next poll."""

    def defer(self, job_id: int, worker_id: str, delay_s: float, error: str) -> bool:
        """See `JobStore.defer`: held by no one until `delay_s` has passed, its recorded call forgotten."""
        return self._move("defer", job=job_id, worker=worker_id, delay_s=delay_s, error=error)

    def release(self, job_id: int, worker_id: str) -> None:
        """Give a job back (graceful shutdown): queued again, this attempt not counted. A recorded call is kept
        (it may still run): the next claimer asks it."""
        self._move("release", job=job_id, worker=worker_id)

    def take_exhausted(self, worker_id: str) -> list[JobRecord]:
        """Fail the running jobs whose lease expired after max_attempts attempts, and return them.

        Each was started `attempts` times and its worker died every time; the caller
        reports them. `worker_id` is recorded as the last owner. A job with a recorded
        call is left to its next claimer, which asks the call.
        """
        with self._lock, self._tx():
            rows = self._db.execute(f"{MOVES['take_exhausted'].sqlite} RETURNING {COLUMNS}",
                                    {"worker": worker_id, "now": time.time(), "max_attempts": self.max_attempts}
                                    ).fetchall()
        return sorted((_record(row, self.store_id) for row in rows), key=lambda job: job.id)

    # -- reading and health -----------------------------------------------

    def job(self, job_id: int) -> JobRecord:
        """The job with id `job_id`; KeyError if there is none."""
        with self._read_lock, self._errors():
            row = self._reader.execute(f"SELECT {COLUMNS} FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            raise KeyError(f"no job {job_id} in {self.path}")
        return _record(row, self.store_id)

    def runs(self, limit: int = 200, *, repos: Collection[str] | None = None,
             state: str | None = None, before: int | None = None) -> list[JobRecord]:
        """The newest `limit` jobs older than job `before` (None: from the newest), newest first, for the
        dashboard; only those of `repos` ("owner/name", any case) when given, only those in `state` when given.
        A page costs what it lists whatever the store holds: an id range (`jobs_open`, `jobs_failed` for a
        state), and for `repos` each repository's newest ids from `jobs_repo`, merged as they are read."""
        params = {"before": before if before is not None else 2**62, "limit": limit}
        if state is not None and state not in STATES:
            raise ValueError(f"no state {state!r}: one of {', '.join(STATES)}")
        and_state = f" AND state = '{state}'" + (" AND state IN ('queued', 'running')" if state in LIVE else "") \
            if state is not None else ""
        with self._read_lock, self._errors():
            if repos is None:
                rows = self._reader.execute(RUNS_PAGE.format(columns=COLUMNS, and_state=and_state), params).fetchall()
            else:
                newest = [self._reader.execute(REPO_RUN_IDS.format(and_state=and_state), {**params, "repo": repo})
                          for repo in sorted({r.lower() for r in repos})]  # cursors, stepped as merged: a page's rows
                ids = [found for (found,) in itertools.islice(heapq.merge(*newest, reverse=True), limit)]
                rows = self._reader.execute(f"SELECT {COLUMNS} FROM jobs WHERE id IN ({', '.join(map(str, ids))}) "
                                            "ORDER BY id DESC").fetchall()
        return [_record(row, self.store_id) for row in rows]

    def snapshot(self, upto: int | None = None) -> Snapshot:
        """The queued jobs (oldest first; with `upto`, each installation's oldest `upto` only), the keys running
        under a live lease and the last claim of each installation with queued jobs, in one read transaction.
        Index probes only: it reads what it returns, however many runs the store keeps."""
        upto = upto if upto is not None else -1  # SQLite: no limit
        with self._read_lock, self._errors():
            self._reader.execute("BEGIN")
            try:
                turns = self._reader.execute(TURNS).fetchall()
                queued = [row for name, _ in turns for row in self._reader.execute(
                    QUEUED_OF.format(columns=COLUMNS), {"installation": name, "upto": upto})]
                running = self._reader.execute("SELECT key, installation FROM jobs WHERE state = 'running' "
                                               "AND lease_expires > ?", (time.time(),)).fetchall()
            finally:
                self._reader.execute("COMMIT")
        return Snapshot(sorted((_record(row, self.store_id) for row in queued), key=lambda job: job.id),
                        [tuple(r) for r in running], {name: at for name, at in turns if at is not None})

    def note(self, job_id: int, text: str) -> bool:
        """Remember what the queued job's comment says; True for the one caller that changed it."""
        return self._move("note", job=job_id, text=text)

    def take_write(self, account: str, horizon_s: float, decide: Decide) -> float:
        """A GitHub write of `account` taken under the write lock, shared by every process on the file (the
        pacer's `Ledger`, bot/jobs/write_ledger.py)."""
        with self._lock, self._tx():
            return write_ledger.take(self._db.execute, "?", account, time.time(), horizon_s, decide)

    def hold_writes(self, account: str, wait_s: float, slow_s: float) -> None:
        """GitHub asked `account`'s writes to wait (the pacer's `Ledger`)."""
        with self._lock, self._tx():
            write_ledger.hold(self._db.execute, "?", account, time.time(), wait_s, slow_s)

    def counts(self) -> dict[str, int]:
        """How many jobs are in each state; every state is present. In one read transaction, from indexes only:
        the open and failed jobs by their partial indexes, all jobs by the smallest full one, done the rest (a
        GROUP BY over the table read every row: 38 ms at 100,000 jobs against 0.5 ms, bench/many_runs.py)."""
        with self._read_lock, self._errors():
            self._reader.execute("BEGIN")
            try:
                counts = dict(self._reader.execute(OPEN_COUNTS).fetchall())
                counts["failed"] = self._reader.execute(FAILED_COUNT).fetchone()[0]
                total = self._reader.execute("SELECT count(*) FROM jobs").fetchone()[0]
            finally:
                self._reader.execute("COMMIT")
        counts = {state: 0 for state in STATES} | counts
        return counts | {"done": total - sum(counts.values())}

    def writable(self) -> bool:
        """True when a small durable write succeeds and a file can be made next to the store (for
        /healthz): SQLite makes its journal there after a restart, and a write to the open file still
        succeeds when the directory was made read-only or taken away."""
        try:
            with tempfile.TemporaryFile(dir=self.path.parent):
                pass
        except OSError:
            return False
        try:
            with self._lock, self._tx():
                self._db.execute("INSERT INTO health (id, probed_at) VALUES (1, ?) "
                                 "ON CONFLICT (id) DO UPDATE SET probed_at = excluded.probed_at", (time.time(),))
        except StoreError:
            return False
        return True

    def close(self) -> None:
        """Close the connections; the store is unusable afterwards."""
        with self._lock, self._read_lock:
            self._db.close()
            self._reader.close()

    # -- plumbing ---------------------------------------------------------

    def _move(self, name: str, **params: Any) -> bool:
        """The state machine's move `name` (bot/jobs/transitions.py) on one job; False when it was refused."""
        now = time.time()
        with self._lock, self._tx():
            return self._db.execute(MOVES[name].sqlite, {"now": now, "expires": now + self.lease_s, **params}
                                    ).rowcount == 1

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as e:
            raise StoreError(f"the job store {self.path} failed: {e}") from e

    @contextmanager
    def _tx(self) -> Iterator[None]:
        """One write transaction, holding SQLite's write lock from the start. Caller holds `_lock`."""
        with self._errors():
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise


def _record(row: tuple[Any, ...], store_id: str) -> JobRecord:
    id_, delivery_id, key, payload, state, attempts, created_at, error, result, call_id, installation = row
    return JobRecord(id=id_, delivery_id=delivery_id, key=key, payload=json.loads(payload), state=state,
                     attempts=attempts, created_at=created_at, error=error,
                     result=None if result is None else json.loads(result), call_id=call_id,
                     installation=installation, store_id=store_id)
