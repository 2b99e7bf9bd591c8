"""The job state machine, written once: each move a job makes, from which state to which, with the SQL of
each store beside it (SQLite, bot/jobs/sqlite.py: `:name` parameters, times passed in as `now` and
`expires`; PostgreSQL, bot/jobs/postgres.py: `%(name)s` parameters, times from the server's clock).

    a delivery -> queued --claim--> running --finish--> done | failed
                  ^  note             |  heartbeat, record_call (still running, under the caller's lease)
                  +------release------+
                                      +--take_exhausted (its lease expired, its attempts spent)--> failed
                                      +--defer (held by no one until its delay ends, then claimed again)

`claim` (queued, or running under an expired lease with attempts left or a recorded call, -> running) is
each store's fair-queue query (bot/jobs/sqlite_sql.py's CLAIM; bot/jobs/postgres.py's _CANDIDATE and
_TAKE), whose rules bot/jobs/store.py's docstring gives; a delivery's job is queued by `record_delivery`.
"""

from __future__ import annotations

from dataclasses import dataclass

PG_NOW = "extract(epoch FROM statement_timestamp())::float8"  # PostgreSQL's clock, in epoch seconds
_HELD_SQLITE = "WHERE id = :job AND lease_owner = :worker AND state = 'running'"
_HELD_PG = "WHERE id = %(job)s AND lease_owner = %(worker)s AND state = 'running'"
_GAVE_UP = "error = 'gave up after ' || attempts || ' attempts: the worker died each time'"


@dataclass(frozen=True)
class Move:
    """One move of the state machine: the state a job must be in, the state it is in after ("done|failed":
    the caller's `state`), and each store's UPDATE for it (one row changed, or none: the move is refused)."""

    source: str
    target: str
    sqlite: str
    postgres: str


MOVES: dict[str, Move] = {
    "heartbeat": Move(
        "running", "running",
        f"UPDATE jobs SET lease_expires = :expires, updated_at = :now {_HELD_SQLITE}",
        f"UPDATE jobs SET lease_expires = {PG_NOW} + %(lease_s)s, updated_at = {PG_NOW} {_HELD_PG}"),
    "finish": Move(
        "running", "done|failed",
        "UPDATE jobs SET state = :state, result = :result, error = :error, lease_owner = NULL, lease_expires = NULL, "
        f"updated_at = :now {_HELD_SQLITE}",
        "UPDATE jobs SET state = %(state)s, result = %(result)s, error = %(error)s, lease_owner = NULL, "
        f"lease_expires = NULL, updated_at = {PG_NOW} {_HELD_PG}"),
    "record_call": Move(  # a call that replaces another is an attempt (the job was started again)
        "running", "running",
        "UPDATE jobs SET attempts = attempts + (call_id IS NOT NULL AND call_id != :call), call_id = :call, "
        f"updated_at = :now {_HELD_SQLITE}",
        "UPDATE jobs SET attempts = attempts + CASE WHEN call_id <> %(call)s THEN 1 ELSE 0 END, call_id = %(call)s, "
        f"updated_at = {PG_NOW} {_HELD_PG}"),
    "release": Move(  # this attempt not counted; a recorded call is kept (it may still run: the next claimer asks)
        "running", "queued",
        "UPDATE jobs SET state = 'queued', attempts = attempts - (call_id IS NULL), lease_owner = NULL, "
        f"lease_expires = NULL, updated_at = :now {_HELD_SQLITE}",
        "UPDATE jobs SET state = 'queued', attempts = attempts - CASE WHEN call_id IS NULL THEN 1 ELSE 0 END, "
        f"lease_owner = NULL, lease_expires = NULL, updated_at = {PG_NOW} {_HELD_PG}"),
    "defer": Move(  # the run asked to run again later: no owner, its lease ends after the delay, its call forgotten
        "running", "running",
        "UPDATE jobs SET lease_owner = NULL, lease_expires = :now + :delay_s, call_id = NULL, error = :error, "
        f"updated_at = :now {_HELD_SQLITE}",
        f"UPDATE jobs SET lease_owner = NULL, lease_expires = {PG_NOW} + %(delay_s)s, call_id = NULL, "
        f"error = %(error)s, updated_at = {PG_NOW} {_HELD_PG}"),
    "note": Move(  # what the queued job's comment says: changed by one caller only
        "queued", "queued",
        "UPDATE jobs SET note = :text WHERE id = :job AND state = 'queued' AND note IS NOT :text",
        "UPDATE jobs SET note = %(text)s WHERE id = %(job)s AND state = 'queued' AND note IS DISTINCT FROM %(text)s"),
    "take_exhausted": Move(  # every expired job at once, no lease held: the caller adds RETURNING its columns
        "running", "failed",
        f"UPDATE jobs SET state = 'failed', lease_owner = :worker, lease_expires = NULL, updated_at = :now, {_GAVE_UP} "
        "WHERE state = 'running' AND lease_expires <= :now AND attempts >= :max_attempts AND call_id IS NULL",
        f"UPDATE jobs SET state = 'failed', lease_owner = %(worker)s, lease_expires = NULL, updated_at = {PG_NOW}, "
        f"{_GAVE_UP} WHERE state = 'running' AND lease_expires <= {PG_NOW} AND attempts >= %(max_attempts)s "
        "AND call_id IS NULL"),
}
