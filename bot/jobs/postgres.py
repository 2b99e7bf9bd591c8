"""The job store in PostgreSQL (DECODE_DATABASE_URL): several `decode serve` and `decode worker`
processes, on several hosts, share one queue.

The semantics are bot/jobs/store.py's (its docstring); what differs is how they are kept:

- Durability: every write is one transaction, committed with `synchronous_commit = on` (set per
  connection, whatever the server's default), so `record_delivery` returns only after the commit is
  on the server's disk.
- Deduplication: the body digest and the delivery id are primary keys, inserted with `ON CONFLICT DO
  NOTHING`; a conflict rolls the whole delivery back. A concurrent insert of the same key waits for
  the other transaction and then sees its row, so exactly one of two racing deliveries wins.
- Claims: the oldest runnable job is locked with `SELECT ... FOR UPDATE SKIP LOCKED`, so concurrent
  claimers never wait for each other nor take the same job. One running job per key: the claimer also
  takes a transaction advisory lock on the key (`pg_try_advisory_xact_lock`) and checks again, under
  it and with a fresh snapshot, that no job of the key runs under a live lease; a key another claimer
  holds is skipped for this claim. With a cap (`Caps`), the claimer first waits for a transaction advisory
  lock on the job's installation (and one on its repository), taken in that order by every claimer, and
  counts the running jobs again under them: two hosts never both take the last place under a cap; an
  installation or repository found at its cap is skipped for this claim. The order of claims (the
  installation whose last claim is oldest first) is the same expression as SQLite's.
- Time: leases and timestamps use the database server's clock, so hosts whose clocks disagree still
  agree on when a lease expired.
- Schema: versioned migrations (`MIGRATIONS`), applied at open under an advisory lock and recorded in
  `schema_migrations`; several processes starting at once apply each migration exactly once. Advisory
  lock ids include the schema name, so stores in different schemas of one database never contend.
- Connections: a small pool of our own (`Pool`, bot/jobs/postgres_pool.py, no psycopg_pool dependency): a call takes an idle
  connection or opens one, and gives it back after its transaction; at most `MAX_IDLE` stay open. A
  connection that raised is closed, and one idle for `PING_AFTER_S` is pinged before use, so a restarted
  server costs at most one failed call per broken connection.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from bot.core.names import new_store_id
from bot.core.redact import MIN_SECRET_LENGTH
from bot.github.pacing import Decide
from bot.jobs import write_ledger
from bot.jobs.postgres_pool import Pool
from bot.jobs.transitions import MOVES, PG_NOW
from bot.jobs.write_ledger import TABLES
from bot.jobs.store import (BODY_RETENTION_S, DELIVERY_RETENTION_S, PRUNE_EVERY_S, STATES, Caps, JobRecord,
                            Snapshot, StoreError, check_final, installation_of, repo_of)

log = logging.getLogger("decode.store")

CLAIM_TRIES = 8  # keys held by concurrent claimers skipped within one claim
# Advisory lock classes (the first key of the two-int form); the second is a hash of schema (and job key).
MIGRATION_LOCK = 0x6465  # "de"
KEY_LOCK = 0x636F  # "co"
INSTALLATION_LOCK = 0x696E  # "in"
REPO_LOCK = 0x7265  # "re"
WRITES_LOCK = 0x6768  # "gh": an account's writes to GitHub
CHANNEL = "decode_jobs"  # NOTIFY on every job queued (or queued again), LISTENed to by `watch`
WATCH_RETRY_S = 5.0

MIGRATIONS: tuple[str, ...] = (
    # 1: the tables of bot/jobs/sqlite.py, with PostgreSQL types.
    """
    CREATE TABLE deliveries (
        id text PRIMARY KEY,
        event text NOT NULL,
        outcome text NOT NULL,
        received_at double precision NOT NULL);
    CREATE INDEX deliveries_received ON deliveries (received_at);
    CREATE TABLE bodies (
        digest text PRIMARY KEY,
        delivery_id text NOT NULL,
        received_at double precision NOT NULL);
    CREATE INDEX bodies_received ON bodies (received_at);
    CREATE TABLE jobs (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        delivery_id text,
        key text NOT NULL,
        payload jsonb NOT NULL,
        state text NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed')),
        attempts integer NOT NULL DEFAULT 0,
        created_at double precision NOT NULL,
        updated_at double precision NOT NULL,
        lease_owner text,
        lease_expires double precision,
        error text,
        result jsonb);
    CREATE INDEX jobs_open ON jobs (id) WHERE state IN ('queued', 'running');
    CREATE INDEX jobs_running_key ON jobs (key, lease_expires) WHERE state = 'running';
    CREATE INDEX jobs_repo ON jobs (lower(split_part(key, '#', 1)), id);
    CREATE TABLE health (id integer PRIMARY KEY CHECK (id = 1), probed_at double precision NOT NULL);
    """,
    # 2: the function call that runs the job (Modal), asked by whoever claims the job next.
    "ALTER TABLE jobs ADD COLUMN call_id text;",
    # 3: the store id (bot/jobs/store.py's docstring), drawn by the first open.
    "CREATE TABLE store (one integer PRIMARY KEY CHECK (one = 1), id text NOT NULL);",
    # 4: the fair queue (bot/jobs/sqlite_sql.py's migrations 3-7).
    """
    ALTER TABLE jobs ADD COLUMN installation text NOT NULL DEFAULT '';
    UPDATE jobs SET installation = lower(split_part(key, '/', 1)) WHERE installation = '';
    ALTER TABLE jobs ADD COLUMN claimed_at double precision;
    ALTER TABLE jobs ADD COLUMN note text;
    CREATE INDEX jobs_turns ON jobs (installation, claimed_at);
    """,
    # 5: listing runs a page at a time by state (`runs`; by repository: `jobs_repo`).
    "CREATE INDEX jobs_state ON jobs (state, id);",
    # 6: the front of the queue without reading the rest (`snapshot(upto=)`): each installation's oldest queued jobs.
    "CREATE INDEX jobs_queued ON jobs (installation, id) WHERE state = 'queued';",
    # 7: GitHub's write budget, shared by every process on the database (bot/jobs/write_ledger.py).
    ";".join(sql.format(real="double precision") for sql in TABLES),
)

_COLUMNS = "id, delivery_id, key, payload, state, attempts, created_at, error, result, call_id, installation"
REPO = "split_part({0}.key, '#', 1)"  # the repository of a job key
_LIVE = f"o.state = 'running' AND o.lease_expires > {PG_NOW} AND o.id != j.id"
# Why the job j may not start now: its key runs, its installation or its repository is at its cap.
_KEY_BUSY = f"EXISTS (SELECT 1 FROM jobs AS o WHERE {_LIVE} AND o.key = j.key)"
_INSTALLATION_FULL = f"""(%(per_installation)s > 0 AND %(per_installation)s <= (
    SELECT count(*) FROM jobs AS o WHERE {_LIVE} AND o.installation = j.installation))"""
_REPO_FULL = f"""(%(per_repo)s > 0 AND %(per_repo)s <= (
    SELECT count(*) FROM jobs AS o WHERE {_LIVE} AND {REPO.format("o")} = {REPO.format("j")}))"""
_CANDIDATE = f"""
SELECT j.id, j.key, j.installation FROM jobs AS j
WHERE j.state IN ('queued', 'running')
  AND (j.state = 'queued'
       OR (j.lease_expires <= {PG_NOW} AND (j.attempts < %(max_attempts)s OR j.call_id IS NOT NULL)))
  AND j.key <> ALL(%(skipped)s::text[]) AND j.installation <> ALL(%(full)s::text[])
  AND {REPO.format("j")} <> ALL(%(full)s::text[])
  AND NOT {_KEY_BUSY} AND NOT {_INSTALLATION_FULL} AND NOT {_REPO_FULL}
ORDER BY (SELECT max(c.claimed_at) FROM jobs AS c WHERE c.installation = j.installation) NULLS FIRST, j.id
LIMIT 1
FOR UPDATE OF j SKIP LOCKED"""
# Asked again under the locks, in a statement of its own (a fresh snapshot): what stops the job now.
_STOPS = f"SELECT {_KEY_BUSY}, {_INSTALLATION_FULL}, {_REPO_FULL} FROM jobs AS j WHERE j.id = %(id)s"
_TAKE = f"""
UPDATE jobs SET state = 'running', lease_owner = %(worker)s, lease_expires = {PG_NOW} + %(lease_s)s,
    attempts = attempts + CASE WHEN call_id IS NULL THEN 1 ELSE 0 END, updated_at = {PG_NOW}, claimed_at = {PG_NOW}
WHERE id = %(id)s RETURNING {_COLUMNS}"""
# bot/jobs/sqlite_sql.py's TURNS and QUEUED_OF: the installations with queued jobs, one skip each through
# jobs_queued, with their last claim (a jobs_turns probe); then each one's oldest queued jobs (LIMIT NULL: all).
_TURNS = """
WITH RECURSIVE i(name) AS (
    (SELECT installation FROM jobs WHERE state = 'queued' ORDER BY installation LIMIT 1)
    UNION ALL
    SELECT (SELECT installation FROM jobs WHERE state = 'queued' AND installation > i.name ORDER BY installation
            LIMIT 1) FROM i WHERE i.name IS NOT NULL)
SELECT name, (SELECT max(claimed_at) FROM jobs WHERE installation = i.name) FROM i WHERE name IS NOT NULL"""
_QUEUED = f"""
SELECT q.* FROM unnest(%(names)s::text[]) AS i(name), LATERAL (SELECT {_COLUMNS} FROM jobs
    WHERE state = 'queued' AND installation = i.name ORDER BY id LIMIT %(upto)s) AS q ORDER BY q.id"""
_LOCK = "SELECT pg_{0}advisory_xact_lock(%s, hashtext(coalesce(current_schema(), '') || ':' || %s))"


class PostgresStore:
    """Deliveries and jobs in the PostgreSQL database at `url` (a `JobStore`); safe across threads,
    processes and hosts."""

    def __init__(self, url: str, *, lease_s: float = 60.0, max_attempts: int = 3, caps: Caps = Caps(),
                 connect_timeout_s: float = 10.0) -> None:
        self.lease_s = lease_s
        self.max_attempts = max_attempts
        self.caps = caps
        self._pool = Pool(url, connect_timeout_s)
        self._password = self._pool.password
        self._last_prune = float("-inf")
        try:
            with self._pool.connection() as conn:
                self.applied = migrate(conn)  # the migration versions this process applied (logged)
                self.store_id = identity(conn)
        except StoreError:
            self._pool.close()
            raise
        except psycopg.Error as e:
            self._pool.close()
            raise StoreError(f"cannot open the job store {self.path}: {self._clean(e)}: check DECODE_DATABASE_URL "
                             "(user, password, host, database) and that the server accepts connections") from None
        if self.applied:
            log.info("job store %s: applied schema migrations %s", self.path, self.applied)

    @property
    def path(self) -> str:
        """The database URL without its password, for log lines and errors."""
        return self._pool.where

    # -- intake -----------------------------------------------------------

    def record_delivery(self, delivery_id: str, event: str, outcome: str,
                        job: tuple[str, dict] | None = None, *, digest: str | None = None) -> int | None | bool:
        """See `bot.jobs.sqlite.Store.record_delivery`: False for a known delivery id or body digest (nothing
        written), else the new job id or None; returns after the commit."""
        value: int | None | bool = False
        with self._tx() as cur:
            if digest is not None and not cur.execute(
                    f"INSERT INTO bodies (digest, delivery_id, received_at) VALUES (%s, %s, {PG_NOW}) "
                    "ON CONFLICT (digest) DO NOTHING", (digest, delivery_id)).rowcount:
                raise psycopg.Rollback
            if not cur.execute(
                    f"INSERT INTO deliveries (id, event, outcome, received_at) VALUES (%s, %s, %s, {PG_NOW}) "
                    "ON CONFLICT (id) DO NOTHING", (delivery_id, event, outcome)).rowcount:
                raise psycopg.Rollback  # undoes the body row too: a duplicate writes nothing
            value = None
            if job is not None:
                key, payload = job
                value = _row(cur.execute(
                    "INSERT INTO jobs (delivery_id, key, payload, state, created_at, updated_at, installation) "
                    f"VALUES (%s, %s, %s, 'queued', {PG_NOW}, {PG_NOW}, %s) RETURNING id",
                    (delivery_id, key, Jsonb(payload), installation_of(key, payload))))[0]
                cur.execute(f"NOTIFY {CHANNEL}")  # sent at the commit, to every process's `watch`
        self._maybe_prune()
        return value

    def _maybe_prune(self) -> None:
        """Forget delivery ids and digests past their retention, at most once per PRUNE_EVERY_S per process,
        in a transaction of its own after the delivery's commit."""
        if time.monotonic() - self._last_prune < PRUNE_EVERY_S:
            return
        self._last_prune = time.monotonic()
        try:
            with self._tx() as cur:
                cur.execute(f"DELETE FROM deliveries WHERE received_at < {PG_NOW} - %s", (DELIVERY_RETENTION_S,))
                cur.execute(f"DELETE FROM bodies WHERE received_at < {PG_NOW} - %s", (BODY_RETENTION_S,))
        except StoreError as e:  # the delivery is committed: it must not be answered as failed
            log.warning("pruning old deliveries failed, trying again in an hour: %s", e)

    # -- workers ----------------------------------------------------------

    def claim(self, worker_id: str) -> JobRecord | None:
        """See `bot.jobs.sqlite.Store.claim`; concurrent claimers skip each other's rows (SKIP LOCKED), and
        wait for each other only on an installation or repository with a cap."""
        params: dict[str, Any] = {"max_attempts": self.max_attempts, "skipped": [], "full": [],
                                  "per_installation": self.caps.per_installation, "per_repo": self.caps.per_repo}
        for _ in range(CLAIM_TRIES):
            with self._tx() as cur:
                row = cur.execute(_CANDIDATE, params).fetchone()
                if row is None:
                    return None
                job_id, key, installation = row
                if self.caps.per_installation:
                    cur.execute(_LOCK.format(""), (INSTALLATION_LOCK, installation))
                if self.caps.per_repo:
                    cur.execute(_LOCK.format(""), (REPO_LOCK, repo_of(key)))
                locked = _row(cur.execute(_LOCK.format("try_"), (KEY_LOCK, key)))[0]
                key_busy, installation_full, repo_full = _row(cur.execute(_STOPS, {**params, "id": job_id}))
                if installation_full or repo_full:
                    params["full"].append(installation if installation_full else repo_of(key))
                    continue
                if not locked or key_busy:
                    params["skipped"].append(key)  # another claimer holds this key: the next runnable job, if any
                    continue
                taken = _row(cur.execute(_TAKE, {"worker": worker_id, "lease_s": self.lease_s, "id": job_id}))
            return JobRecord(*taken, store_id=self.store_id)
        return None

    def heartbeat(self, job_id: int, worker_id: str) -> bool:
        """Extend the lease of `worker_id` on the job; False if the lease was lost."""
        return self._move("heartbeat", job=job_id, worker=worker_id, lease_s=self.lease_s)

    def finish(self, job_id: int, worker_id: str, state: str, *, result: dict | None = None,
               error: str | None = None) -> bool:
        """End a job `worker_id` holds as `state` (done or failed); False if the lease was lost."""
        check_final(state)
        return self._move("finish", job=job_id, worker=worker_id, state=state, error=error,
                          result=None if result is None else Jsonb(result))

    def record_call(self, job_id: int, worker_id: str, call_id: str) -> bool:
        """See `bot.jobs.sqlite.Store.record_call`: a call that replaces another is an attempt."""
        return self._move("record_call", job=job_id, worker=worker_id, call=call_id)

    def defer(self, job_id: int, worker_id: str, delay_s: float, error: str) -> bool:
        """See `JobStore.defer`: held by no one until `delay_s` has passed, its recorded call forgotten."""
        return self._move("defer", job=job_id, worker=worker_id, delay_s=delay_s, error=error)

    def release(self, job_id: int, worker_id: str) -> None:
        """Give a job back (graceful shutdown): queued again, this attempt not counted; a recorded call is kept."""
        with self._tx() as cur:
            if cur.execute(MOVES["release"].postgres, {"job": job_id, "worker": worker_id}).rowcount:
                cur.execute(f"NOTIFY {CHANNEL}")

    def watch(self, on_job: Callable[[], None]) -> None:
        """Call `on_job` whenever any process queues a job on this database (LISTEN on a connection of its own,
        in a daemon thread, until `close`); a lost connection is logged and opened again every WATCH_RETRY_S,
        the runner's poll covering the gap."""
        threading.Thread(target=self._listen, args=(on_job,), name="store-watch", daemon=True).start()

    def _listen(self, on_job: Callable[[], None]) -> None:
        failing = False
        while not self._pool.closed:
            try:
                with self._pool.listener() as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    failing = False
                    while not self._pool.closed:
                        for _ in conn.notifies(timeout=1.0, stop_after=1):
                            on_job()
            except psycopg.Error as e:
                if not failing:
                    log.warning("cannot listen for new jobs on %s (%s); polling meanwhile", self.path, self._clean(e))
                failing = True
                time.sleep(WATCH_RETRY_S)

    def take_exhausted(self, worker_id: str) -> list[JobRecord]:
        """Fail the running jobs without a recorded call whose lease expired after max_attempts attempts, and
        return them."""
        with self._tx() as cur:
            rows = cur.execute(f"{MOVES['take_exhausted'].postgres} RETURNING {_COLUMNS}",
                               {"worker": worker_id, "max_attempts": self.max_attempts}).fetchall()
        return sorted((JobRecord(*row, store_id=self.store_id) for row in rows), key=lambda job: job.id)

    # -- reading and health -----------------------------------------------

    def job(self, job_id: int) -> JobRecord:
        """The job with id `job_id`; KeyError if there is none."""
        with self._tx() as cur:
            row = cur.execute(f"SELECT {_COLUMNS} FROM jobs WHERE id = %s", (job_id,)).fetchone()
        if row is None:
            raise KeyError(f"no job {job_id} in {self.path}")
        return JobRecord(*row, store_id=self.store_id)

    def runs(self, limit: int = 200, *, repos: Collection[str] | None = None,
             state: str | None = None, before: int | None = None) -> list[JobRecord]:
        """See `bot.jobs.sqlite.Store.runs`: one query, each repository's newest ids through `jobs_repo`
        (a LATERAL probe per repository) or an id range and `jobs_state`."""
        params = {"before": before if before is not None else 2**62, "limit": limit, "state": state,
                  "repos": sorted({r.lower() for r in repos or ()})}
        and_state = " AND state = %(state)s" if state is not None else ""
        ids = f"SELECT id FROM jobs WHERE id < %(before)s{and_state} ORDER BY id DESC LIMIT %(limit)s"
        if repos is not None:
            ids = ("SELECT p.id FROM unnest(%(repos)s::text[]) AS r(name), LATERAL (SELECT id FROM jobs WHERE "
                   f"lower(split_part(key, '#', 1)) = r.name AND id < %(before)s{and_state} ORDER BY id DESC "
                   "LIMIT %(limit)s) AS p ORDER BY p.id DESC LIMIT %(limit)s")
        with self._tx() as cur:
            rows = cur.execute(f"SELECT {_COLUMNS} FROM jobs WHERE id IN ({ids}) ORDER BY id DESC", params).fetchall()
        return [JobRecord(*row, store_id=self.store_id) for row in rows]

    def snapshot(self, upto: int | None = None) -> Snapshot:
        """See `bot.jobs.sqlite.Store.snapshot`: read in one REPEATABLE READ transaction, by index probes."""
        with self._tx() as cur:
            cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            turns = cur.execute(_TURNS).fetchall()
            queued = cur.execute(_QUEUED, {"names": [name for name, _ in turns], "upto": upto}).fetchall()
            running = cur.execute(f"SELECT key, installation FROM jobs WHERE state = 'running' "
                                  f"AND lease_expires > {PG_NOW}").fetchall()
        return Snapshot([JobRecord(*row, store_id=self.store_id) for row in queued], [tuple(r) for r in running],
                        {name: at for name, at in turns if at is not None})

    def note(self, job_id: int, text: str) -> bool:
        """Remember what the queued job's comment says; True for the one caller that changed it."""
        return self._move("note", job=job_id, text=text)

    def take_write(self, account: str, horizon_s: float, decide: Decide) -> float:
        """A GitHub write of `account` taken under an advisory lock on the account, on the server's clock, shared
        by every process and host on the database (the pacer's `Ledger`, bot/jobs/write_ledger.py)."""
        with self._tx() as cur:
            cur.execute(_LOCK.format(""), (WRITES_LOCK, account))
            now = _row(cur.execute(f"SELECT {PG_NOW}"))[0]
            return write_ledger.take(cur.execute, "%s", account, now, horizon_s, decide)

    def hold_writes(self, account: str, wait_s: float, slow_s: float) -> None:
        """GitHub asked `account`'s writes to wait (the pacer's `Ledger`), on the server's clock."""
        with self._tx() as cur:
            write_ledger.hold(cur.execute, "%s", account, _row(cur.execute(f"SELECT {PG_NOW}"))[0], wait_s, slow_s)

    def counts(self) -> dict[str, int]:
        """How many jobs are in each state; every state is present."""
        with self._tx() as cur:
            rows = cur.execute("SELECT state, count(*) FROM jobs GROUP BY state").fetchall()
        return {state: 0 for state in STATES} | dict(rows)

    def writable(self) -> bool:
        """True when a small durable write commits (for /healthz)."""
        try:
            with self._tx() as cur:
                cur.execute(f"INSERT INTO health (id, probed_at) VALUES (1, {PG_NOW}) "
                            "ON CONFLICT (id) DO UPDATE SET probed_at = excluded.probed_at")
        except StoreError:
            return False
        return True

    def close(self) -> None:
        """Close the connections; the store is unusable afterwards."""
        self._pool.close()

    # -- plumbing ---------------------------------------------------------

    def _move(self, name: str, **params: Any) -> bool:
        """The state machine's move `name` (bot/jobs/transitions.py) on one job; False when it was refused."""
        with self._tx() as cur:
            return cur.execute(MOVES[name].postgres, params).rowcount == 1

    @contextmanager
    def _tx(self) -> Iterator[psycopg.Cursor[Any]]:
        """One transaction on a pooled connection; a database error becomes a StoreError without secrets."""
        try:
            with self._pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
                yield cur
        except psycopg.Error as e:
            raise StoreError(f"the job store {self.path} failed: {self._clean(e)}") from None

    def _clean(self, error: BaseException) -> str:
        text = " ".join(str(error).split()) or type(error).__name__  # libpq's message spans lines: one line
        password = self._password  # redacted as the log redactor does: when long enough to be a secret
        return text.replace(password, "[REDACTED]") if password and len(password) >= MIN_SECRET_LENGTH else text


def migrate(conn: psycopg.Connection[Any]) -> list[int]:
    """Apply the migrations `conn`'s schema lacks, each once, in one transaction under an advisory lock
    (so processes starting together wait for the first); returns the versions applied."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(coalesce(current_schema(), '')))", (MIGRATION_LOCK,))
        conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, "
                     "applied_at timestamptz NOT NULL DEFAULT now())")
        done = {version for (version,) in conn.execute("SELECT version FROM schema_migrations")}
        if done and max(done) > len(MIGRATIONS):
            raise StoreError(f"the database holds schema version {max(done)}, newer than this decode-bot knows "
                             f"({len(MIGRATIONS)}): run the newer version, or point DECODE_DATABASE_URL elsewhere")
        applied = []
        for version, sql in enumerate(MIGRATIONS, start=1):
            if version not in done:
                conn.execute(sql.encode())
                conn.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (version,))
                applied.append(version)
    return applied


def identity(conn: psycopg.Connection[Any]) -> str:
    """The store id: drawn by the first process that opens the schema (a racing one's insert does nothing),
    read by every later one."""
    with conn.transaction():
        conn.execute("INSERT INTO store (one, id) VALUES (1, %s) ON CONFLICT (one) DO NOTHING", (new_store_id(),))
        return str(_row(conn.execute("SELECT id FROM store"))[0])


def _row(cur: psycopg.Cursor[Any]) -> tuple[Any, ...]:
    """The row of a statement that always returns one (INSERT ... RETURNING, a count, a lock taken)."""
    row = cur.fetchone()
    assert row is not None, "the statement returns a row"
    return row
