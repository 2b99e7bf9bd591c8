"""The job state machine is one table (bot/jobs/transitions.py): each move's SQL, for both stores, asks the
state the move starts from and sets the state it ends in; the stores' behaviour is tests/jobs/test_store.py's,
run on both."""

from __future__ import annotations

import re

from bot.jobs.store import STATES
from bot.jobs.transitions import MOVES


def test_each_moves_sql_starts_from_its_state_and_ends_in_its_state() -> None:
    assert set(MOVES) == {"heartbeat", "finish", "record_call", "release", "defer", "note", "take_exhausted"}
    for name, move in MOVES.items():
        assert move.source in STATES and set(move.target.split("|")) <= set(STATES), name
        for sql in (move.sqlite, move.postgres):
            where = sql.partition(" WHERE ")[2]
            assert f"state = '{move.source}'" in where, (name, sql)
            sets = re.search(r"SET state = ('(\w+)'|\S+),", sql)
            if move.target == move.source:
                assert sets is None, (name, sql)  # a move within a state never writes the state
            elif "|" in move.target:
                assert sets is not None and sets[1] in (":state", "%(state)s"), (name, sql)
            else:
                assert sets is not None and sets[2] == move.target, (name, sql)


def test_the_two_stores_take_the_same_parameters_for_each_move() -> None:
    for name, move in MOVES.items():
        sqlite = set(re.findall(r":(\w+)", move.sqlite)) - {"now", "expires"}  # times the SQLite store passes in
        postgres = set(re.findall(r"%\((\w+)\)s", move.postgres)) - {"lease_s"}  # the server's clock adds it
        assert sqlite == postgres, name
