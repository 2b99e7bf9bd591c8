"""The SQL of the SQLite job store (bot/jobs/sqlite.py): its schema, its migrations and its claim.

The claim's rules are bot/jobs/store.py's docstring; PostgreSQL's are the same (bot/jobs/postgres.py).
"""

from __future__ import annotations

from bot.jobs.write_ledger import TABLES

SCHEMA = """
CREATE TABLE IF NOT EXISTS deliveries (
    id TEXT PRIMARY KEY,
    event TEXT NOT NULL,
    outcome TEXT NOT NULL,
    received_at REAL NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS deliveries_received ON deliveries (received_at);
CREATE TABLE IF NOT EXISTS bodies (
    digest TEXT PRIMARY KEY,
    delivery_id TEXT NOT NULL,
    received_at REAL NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS bodies_received ON bodies (received_at);
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    delivery_id TEXT,
    key TEXT NOT NULL,
    payload TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed')),
    attempts INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    lease_owner TEXT,
    lease_expires REAL,
    error TEXT,
    result TEXT
);
CREATE INDEX IF NOT EXISTS jobs_open ON jobs (id) WHERE state IN ('queued', 'running');
CREATE INDEX IF NOT EXISTS jobs_running_key ON jobs (key, lease_expires) WHERE state = 'running';
CREATE TABLE IF NOT EXISTS health (id INTEGER PRIMARY KEY CHECK (id = 1), probed_at REAL NOT NULL);
"""
MIGRATIONS: tuple[str, ...] = (
    "ALTER TABLE jobs ADD COLUMN call_id TEXT",  # 1: the function call that runs the job (Modal)
    "CREATE TABLE IF NOT EXISTS store (one INTEGER PRIMARY KEY CHECK (one = 1), id TEXT NOT NULL)",  # 2: the store id
    # 3-7: the fair queue: the installation a job counts against (older jobs: their owner, as
    # `installation_of` says for a job no installation delivered), when it was last claimed, what its
    # queued comment says.
    "ALTER TABLE jobs ADD COLUMN installation TEXT NOT NULL DEFAULT ''",
    "UPDATE jobs SET installation = lower(substr(key, 1, instr(key, '/') - 1)) WHERE installation = ''",
    "ALTER TABLE jobs ADD COLUMN claimed_at REAL",
    "ALTER TABLE jobs ADD COLUMN note TEXT",
    "CREATE INDEX IF NOT EXISTS jobs_turns ON jobs (installation, claimed_at)",
    # 8-9: listing runs a page at a time (`Store.runs`), newest first: the failed ones (queued and running
    # ones have jobs_open, done ones are most), and by repository. No (state, id) index: with one, SQLite's
    # planner scans the whole table for the claim instead of jobs_open.
    "CREATE INDEX IF NOT EXISTS jobs_failed ON jobs (id) WHERE state = 'failed'",
    "CREATE INDEX IF NOT EXISTS jobs_repo ON jobs (lower(substr(key, 1, instr(key, '#') - 1)), id)",
    # 10: the front of the queue without reading the rest (`Store.snapshot(upto=)`): each installation's
    # oldest queued jobs.
    "CREATE INDEX IF NOT EXISTS jobs_queued ON jobs (installation, id) WHERE state = 'queued'",
    # 11-13: GitHub's write budget, shared by every process on the file (bot/jobs/write_ledger.py).
    *(sql.format(real="REAL") for sql in TABLES),
)

# How many jobs are open, and failed, through their partial indexes (jobs_open, jobs_failed): `Store.counts`.
OPEN_COUNTS = "SELECT state, count(*) FROM jobs WHERE state IN ('queued', 'running') GROUP BY state"
FAILED_COUNT = "SELECT count(*) FROM jobs WHERE state = 'failed'"

# A page of runs older than job :before: by id (a state named as a literal, so that SQLite takes the partial
# index of that state), and one repository's newest ids (jobs_repo).
RUNS_PAGE = "SELECT {columns} FROM jobs WHERE id < :before{and_state} ORDER BY id DESC LIMIT :limit"
REPO_RUN_IDS = ("SELECT id FROM jobs WHERE lower(substr(key, 1, instr(key, '#') - 1)) = :repo AND id < :before"
                "{and_state} ORDER BY id DESC LIMIT :limit")

# The installations with queued jobs, each found from the one before it through jobs_queued (a skip per
# installation, never a read of the queue), with when it last had a job claimed (jobs_turns: a probe, never a
# GROUP BY over every run); then one installation's oldest queued jobs.
TURNS = """
WITH RECURSIVE i(name) AS (
    SELECT (SELECT min(installation) FROM jobs WHERE state = 'queued')
    UNION ALL
    SELECT (SELECT min(installation) FROM jobs WHERE state = 'queued' AND installation > i.name) FROM i
    WHERE i.name IS NOT NULL)
SELECT name, (SELECT max(claimed_at) FROM jobs WHERE installation = i.name) FROM i WHERE name IS NOT NULL
"""
QUEUED_OF = ("SELECT {columns} FROM jobs WHERE state = 'queued' AND installation = :installation "
             "ORDER BY id LIMIT :upto")

COLUMNS = "id, delivery_id, key, payload, state, attempts, created_at, error, result, call_id, installation"

REPO = "substr({0}.key, 1, instr({0}.key, '#') - 1)"  # the repository of a job key
_LIVE = "o.state = 'running' AND o.lease_expires > :now AND o.id != j.id"
# Among the jobs that are queued, or running under an expired lease with attempts left or a call to ask,
# whose key has no other job running under a live lease and whose installation and repository are under
# their caps (0: none): the oldest job of the installation whose last claim is the oldest (never: first).
RUNNABLE = f"""
SELECT j.id FROM jobs AS j
WHERE j.state IN ('queued', 'running')
  AND (j.state = 'queued' OR (j.lease_expires <= :now AND (j.attempts < :max_attempts OR j.call_id IS NOT NULL)))
  AND NOT EXISTS (SELECT 1 FROM jobs AS o WHERE {_LIVE} AND o.key = j.key)
  AND (:per_installation = 0 OR :per_installation > (
      SELECT count(*) FROM jobs AS o WHERE {_LIVE} AND o.installation = j.installation))
  AND (:per_repo = 0 OR :per_repo > (
      SELECT count(*) FROM jobs AS o WHERE {_LIVE} AND {REPO.format("o")} = {REPO.format("j")}))
ORDER BY (SELECT max(c.claimed_at) FROM jobs AS c WHERE c.installation = j.installation), j.id
LIMIT 1
"""
CLAIM = f"""
UPDATE jobs
SET state = 'running', lease_owner = :worker, lease_expires = :expires,
    attempts = attempts + (call_id IS NULL), updated_at = :now, claimed_at = :now
WHERE id = ({RUNNABLE})
RETURNING {COLUMNS}
"""
