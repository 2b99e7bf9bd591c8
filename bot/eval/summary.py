"""What `decode eval` writes and prints: results.jsonl (one object a task, as each ends), the table, the
last lines (`resolved R of V`, cost, time)."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from bot.eval.runner import Outcome

RESULTS = "results.jsonl"


class Results:
    """DIR/results.jsonl, written a line at a time as tasks end (from any thread), so an interrupted
    evaluation keeps what it measured."""

    def __init__(self, out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        self.path = out / RESULTS
        self._file: TextIO = open(self.path, "w", encoding="utf-8")
        self._lock = threading.Lock()

    def add(self, outcome: Outcome) -> None:
        with self._lock:
            self._file.write(json.dumps(outcome.to_json(), ensure_ascii=False) + "\n")
            self._file.flush()

    def close(self) -> None:
        self._file.close()


def table(outcomes: Sequence[Outcome]) -> list[str]:
    """One row a task, in task-file order: id, status, turns, cost, seconds."""
    width = max([len("id"), *(len(o.id) for o in outcomes)])
    rows = [f"{'id':<{width}}  {'status':<10}  {'turns':>5}  {'cost':>9}  {'seconds':>8}"]
    rows += [f"{o.id:<{width}}  {o.status:<10}  {o.figures.turns:>5}  {f'${o.figures.cost_usd:.4f}':>9}  {o.seconds:>8.1f}"
             for o in outcomes]
    return rows


def last_lines(outcomes: Sequence[Outcome], seconds: float, results: Path) -> list[str]:
    """`resolved R of V` (V: the valid tasks, neither invalid nor errored), the results that change
    .github/decode.yml when there are any, then cost, time and the file."""
    count = {status: sum(o.status == status for o in outcomes) for status in ("resolved", "unresolved",
                                                                               "invalid", "error")}
    valid = count["resolved"] + count["unresolved"]
    share = f" ({count['resolved'] / valid:.0%})" if valid else ""
    cost = sum(o.figures.cost_usd for o in outcomes)
    changed = [o.id for o in outcomes if o.changes_config]
    marked = [f"{len(changed)} result(s) change .github/decode.yml, checked under the base's: {', '.join(changed)}"]
    attempts = max((o.attempts for o in outcomes), default=1)
    passed = sum(o.pass_at_n for o in outcomes if o.status in ("resolved", "unresolved"))
    at_n = [f"attempts {attempts}: verify-picked {count['resolved']} of {valid}, pass@{attempts} {passed} of {valid}"
            + (f" ({passed / valid:.0%})" if valid else "")]
    return [f"resolved {count['resolved']} of {valid}{share}; {len(outcomes)} tasks: {count['invalid']} invalid, "
            f"{count['error']} errors",
            *(at_n if attempts > 1 else []),
            *(marked if changed else []),
            f"cost ${cost:.4f}, time {seconds:.1f}s",
            f"results: {results}"]
