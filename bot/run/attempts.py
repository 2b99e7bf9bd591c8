"""Best of N: N attempts of one job at once, each its own run (run id, sandbox, workspace, transcript) through
the real pipeline, sharing the warm pool and the setup cache, each verified with decode.yml's `verify:`; the
one to publish picked by `pick`, a pure function of what each attempt did.

`DECODE_MAX_COST_USD` caps the whole run: every attempt pays from one `Purse`, so when the attempts together
reach it, each stops at its next turn, and one that had not made its first turn yet is listed as not started.
docs/decode-yml.md says how attempts are picked and shown.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from bot.agent.purse import Purse
from bot.config import Budget, RunParts
from bot.core.names import best_of_run_id
from bot.run.pipeline import Job, Ran, execute

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Attempt:
    """What one attempt did, as the pick and the PR body read it."""

    number: int  # 1-based
    verified: str  # passed | failed | none (bot.run.verify.Verification.verified)
    changed_lines: int  # lines added plus lines removed; 0: it changed nothing
    turns: int = 0
    cost_usd: float = 0.0
    transcript: str = ""  # where its transcript is: a path, or a Markdown link to its page
    error: str | None = None  # why it did not finish ("error: ...", "stopped: ...", "not started: ..."): never picked
    run_id: str = ""


def pick(attempts: Sequence[Attempt]) -> Attempt | None:
    """The attempt to publish: of those that passed `verify`, the fewest changed lines (a tie: the cheapest,
    then the first); with none that passed, and no `verify:` at all, the same among those that changed
    anything; None when there is nothing to publish (every attempt failed `verify`, or changed nothing)."""
    changed = [a for a in attempts if a.error is None and a.changed_lines > 0]
    passed = [a for a in changed if a.verified == "passed"]
    unverified = [a for a in changed if a.verified == "none"] if not any(a.verified != "none" for a in changed) else []
    pool = passed or unverified
    return min(pool, key=lambda a: (a.changed_lines, a.cost_usd, a.number)) if pool else None


def run_attempts(job: Job, count: int, progress: Progress, watch: Callable[[int, dict[str, Any]], None] | None = None,
                 *, parts: RunParts) -> tuple[Ran | None, list[Attempt], list[Ran | None]]:
    """`count` attempts of `job` at once, on threads: the one `pick` chose (None: none to publish), what each
    did, and each one's `Ran` (None for one that failed). Each runs as its own job (run id `best_of_run_id`), on
    the job's branch in its own clone, paying from one `Purse` of the whole cost cap (an attempt that finds it
    spent out before its first turn did not start, and says so); `watch` sees each one's transcript events with
    its number (the tracking comment's view of every attempt), and an `attempt` event with the line of one that
    did not finish. `parts` are `execute`'s."""
    purse, lock = Purse(parts.budget.max_cost_usd), threading.Lock()

    def one(number: int) -> tuple[Attempt, Ran | None]:
        def said(line: str) -> None:
            with lock:
                progress(f"[attempt {number}] {line}")

        seen = None if watch is None else lambda event: watch(number, event)
        run_id = best_of_run_id(job.run_id, number)
        try:
            ran = execute(replace(job, run_id=run_id, purse=purse), parts, progress=said, watch=seen)
        except Exception as e:  # noqa: BLE001 - one attempt's failure is its line in the list, the others go on
            failed = Attempt(number, "none", 0, run_id=run_id,
                             error=f"error: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
            return said_how(failed), None
        return said_how(attempt_of(number, ran, parts.budget)), ran

    def said_how(what: Attempt) -> Attempt:  # one that did not finish: how it ended, on its tracking line
        if what.error is not None and watch is not None:
            watch(what.number, {"type": "attempt", "state": what.error})
        return what

    with ThreadPoolExecutor(max_workers=count, thread_name_prefix="attempt") as pool:
        done = [future.result() for future in [pool.submit(one, n) for n in range(1, count + 1)]]
    attempts, rans = [a for a, _ in done], [r for _, r in done]
    chosen = pick(attempts)
    return (rans[chosen.number - 1] if chosen else None), attempts, rans


def stand_in(chosen: Ran | None, attempts: Sequence[Attempt], rans: Sequence[Ran | None]) -> Ran | None:
    """The run to deliver: the picked one; with none picked (every attempt failed `verify`, changed nothing or
    was stopped by a cap), the first that started, else the first that finished, delivered as a single run that
    ended so would be (a budget stop exits 3); None when none finished."""
    finished = [ran for ran in rans if ran is not None]
    started = [ran for ran, attempt in zip(rans, attempts) if ran is not None and attempt.turns]
    return chosen or next(iter(started + finished), None)


def attempt_of(number: int, ran: Ran, budget: Budget) -> Attempt:
    """What a finished run did, as an `Attempt`: one stopped by the run's cost cap before its first turn did
    not start."""
    figures, stop = ran.result.figures, ran.result.stop_reason
    turns = figures.turns if figures else 0
    if stop in ("completed", "error"):
        error = None if stop == "completed" else f"error: {ran.result.error}"
    elif stop == "max_cost":  # the attempts' cost cap is the run's (one `Purse`)
        spent = f"the run's budget (DECODE_MAX_COST_USD={budget.max_cost_usd:g}) was spent"
        error = f"stopped: {spent}" if turns else f"not started: {spent}"
    else:  # another cap, an interrupt
        error = f"stopped: {stop}"
    return Attempt(number, ran.verification.verified, changed_lines(ran), turns=turns,
                   cost_usd=figures.cost_usd if figures else 0.0, transcript=str(ran.transcript_md),
                   run_id=ran.job.run_id, error=error)


def changed_lines(ran: Ran) -> int:
    """Lines added plus removed by the run's commit (0 without one); a binary file counts as one line."""
    if ran.result.commit is None or ran.workspace is None:
        return 0
    done = subprocess.run(["git", "diff", "--numstat", ran.workspace.base_sha, ran.result.commit],
                          cwd=ran.workspace.clean, capture_output=True, text=True, check=True)
    total = 0
    for line in done.stdout.splitlines():
        added, removed = line.split("\t")[:2]
        total += 1 if added == "-" else int(added) + int(removed)
    return total


def table(attempts: Sequence[Attempt], chosen: Attempt | None) -> list[str]:
    """The attempts as Markdown table rows (the PR body's and `decode run`'s list), the chosen one marked."""
    rows = ["| attempt | verify | changed lines | turns | cost | transcript |", "| --- | --- | --- | --- | --- | --- |"]
    for a in attempts:
        mark = " (published)" if chosen is not None and a.number == chosen.number else ""
        verify = a.error or a.verified
        rows.append(f"| {a.number}{mark} | {verify} | {a.changed_lines} | {a.turns} | ${a.cost_usd:.4f} | "
                    f"{a.transcript or '-'} |")
    return rows


def why(attempts: Sequence[Attempt], chosen: Attempt | None) -> str:
    """One line saying how the published attempt was picked, or why none was."""
    if chosen is None and all(a.error is not None for a in attempts):
        return f"none of the {len(attempts)} attempts finished (each one's row says why)"
    if chosen is None:
        return f"none of the {len(attempts)} attempts passed `verify` with a change to publish"
    if chosen.verified == "none":
        return (f"attempt {chosen.number} of {len(attempts)}: there was nothing to verify by (no `verify:` in "
                ".github/decode.yml), so the fewest changed lines of those that changed anything")
    return (f"attempt {chosen.number} of {len(attempts)}: it passed `verify`, with the fewest changed lines of those "
            "that did")
