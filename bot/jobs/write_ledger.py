"""The job store as the GitHub write pacer's `Ledger` (bot/github/pacing.py): every process and host on one
store counts its writes to GitHub in one place, so an installation's writes stay within GitHub's limit on
content-creating requests however many workers write for it.

Two tables: `github_writes` (account, at: one row a write, kept for the pacer's longest window) and
`github_holds` (account: until when GitHub asked its writes to wait, and to go slowly after). Each store
takes a write atomically, in one transaction under a lock on the account (SQLite: its write lock; PostgreSQL:
an advisory lock), on its own clock (PostgreSQL: the server's, so hosts agree), and calls `take` and `hold`
here with its statement runner and parameter mark: the SQL is written once for both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bot.github.pacing import Decide

TABLES = (  # each store's migration; `{real}` its floating-point type
    "CREATE TABLE IF NOT EXISTS github_writes (account text NOT NULL, at {real} NOT NULL)",
    "CREATE INDEX IF NOT EXISTS github_writes_account ON github_writes (account, at)",
    "CREATE TABLE IF NOT EXISTS github_holds (account text PRIMARY KEY, paused_until {real} NOT NULL, "
    "slow_until {real} NOT NULL)",
)
Execute = Callable[[str, tuple[Any, ...]], Any]  # a cursor's execute: returns something to iterate or fetchone


def take(execute: Execute, mark: str, account: str, now: float, horizon_s: float, decide: Decide) -> float:
    """`Ledger.take_write` inside the caller's locked transaction: forget `account`'s writes older than
    `horizon_s`, ask `decide`, and record a write at `now` when it answers 0 or less."""
    execute(f"DELETE FROM github_writes WHERE account = {mark} AND at <= {mark}", (account, now - horizon_s))
    writes = [at for (at,) in execute(f"SELECT at FROM github_writes WHERE account = {mark} ORDER BY at", (account,))]
    held = execute(f"SELECT paused_until, slow_until FROM github_holds WHERE account = {mark}", (account,)).fetchone()
    paused_until, slow_until = held or (0.0, 0.0)
    wait = decide(writes, paused_until, slow_until, now)
    if wait <= 0:
        execute(f"INSERT INTO github_writes (account, at) VALUES ({mark}, {mark})", (account, now))
    return float(wait)


def hold(execute: Execute, mark: str, account: str, now: float, wait_s: float, slow_s: float) -> None:
    """`Ledger.hold_writes` in the caller's transaction: a later pause than the one held wins."""
    until = now + wait_s
    later = "CASE WHEN github_holds.paused_until > excluded.paused_until THEN github_holds.paused_until " \
            "ELSE excluded.paused_until END"
    execute(f"INSERT INTO github_holds (account, paused_until, slow_until) VALUES ({mark}, {mark}, {mark}) "
            f"ON CONFLICT (account) DO UPDATE SET paused_until = {later}, slow_until = {later} + {mark}",
            (account, until, until + slow_s, slow_s))
