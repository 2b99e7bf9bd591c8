"""The run's result: JSON round trips, and records of earlier shapes read without raising."""

from __future__ import annotations

import json

import pytest

from bot.model import Usage
from bot.run.result import Figures, RunResult, state_of


def test_a_result_round_trips_through_json():
    result = RunResult("job-7", "incomplete", repo="octo/app", branch="decode/issue-7-x", attempt=2, commit="abc",
                       changed=("a.py", "b/c.md"), left_out={"big.bin": "over 50 MB"}, blocked={"evil.test:443": 3},
                       verified="failed", stop_reason="max_cost", exit_code=3, pr_url="https://x/pull/1",
                       figures=Figures(turns=4, usage=Usage(10, 2, 5, 1), cost_usd=0.5, seconds=12.5, trims=2),
                       finished_at=99.0, retry_later=True)
    assert RunResult.from_json(json.loads(json.dumps(result.to_json()))) == result


def test_the_earlier_store_and_record_shapes_read_what_they_hold():
    store = RunResult.from_json({"state": "success", "exit_code": 0, "error": None, "pr_url": "https://x/pull/2",
                                 "branch": "decode/issue-1", "verified": "passed", "figures": {
                                     "turns": 3, "seconds": 42.0, "cost_usd": 0.25,
                                     "tokens": {"input": 1000, "output": 200, "cache_read": 7, "cache_write": 9}}},
                                run_id="job-1")
    assert store is not None and (store.run_id, store.state, store.verified) == ("job-1", "success", "passed")
    assert store.figures == Figures(turns=3, usage=Usage(1000, 200, 7, 9), cost_usd=0.25, seconds=42.0)
    record = RunResult.from_json({"run_id": "r", "attempt": 2, "repo": "octo/app", "branch": "b", "commit": "c1",
                                  "stop_reason": "completed", "error": None, "turns": 2, "cost_usd": 0.5,
                                  "wall_s": 30.0, "changed": ["x"], "left_out": {}, "verified": "none",
                                  "finished_at": 5.0})
    assert record is not None and (record.state, record.commit, record.changed, record.attempt) == (
        "success", "c1", ("x",), 2)
    assert record.figures == Figures(turns=2, cost_usd=0.5, seconds=30.0)


@pytest.mark.parametrize("data", [None, [], "x", 3, {}, {"figures": "no", "changed": "x", "left_out": [1],
                                                          "state": 5, "turns": True, "attempt": "two"}])
def test_anything_else_reads_without_raising(data):
    result = RunResult.from_json(data)
    assert result is None if not isinstance(data, dict) else result is not None and result.changed == ()


def test_states_before_publishing():
    assert [state_of("completed", "c"), state_of("max_turns", "c"), state_of("completed", None),
            state_of("error", "c"), state_of("max_cost", None)] == \
        ["success", "incomplete", "no_changes", "failed", "no_changes"]
    read_only = [state_of(reason, None, read_only=True) for reason in ("completed", "max_turns", "error")]
    assert read_only == ["success", "incomplete", "failed"], "a plan answers instead of committing"
