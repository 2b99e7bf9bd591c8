"""What a completed `decode-bot` check run says, from a job's conclusion: the contract's conclusions, the
titles, the summary (redacted) and the verification with each failing command's tail, within GitHub's limits."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.agent.loop import AgentResult
from bot.github.check_run import LIMIT, completed, outcome
from bot.github.conclusion import Conclusion
from bot.run.pipeline import Job, Ran
from bot.run.result import Figures, RunResult
from bot.run.verify import Check, Verification

PASSED = Verification(True, (Check("make test", 0, 1.5),), rounds=1)
FAILED = Verification(True, (Check("make test", 2, 3.0, tail="E   assert 5 > 5\n```\nFAILED test_weekend"),
                             Check("make lint", 0, 0.4)), rounds=2, feedback=1)


def ran(stop: str = "completed", verification: Verification = Verification(), summary: str = "Fixed it.",
        state: str = "success") -> Ran:
    agent = AgentResult(stop, summary, turns=3, cost_usd=0.12, seconds=42.0)
    result = RunResult("job-7", state, commit="c0ffee", stop_reason=stop, figures=Figures.of(agent),
                       verified=verification.verified)
    return Ran(Job(repo="octo/calendar", task="t", branch="b", run_id="job-7"), result, agent, verification,
               Path("/nonexistent"))


@pytest.mark.parametrize("conclusion, expected, title", [
    (Conclusion.of_run(ran(verification=PASSED), "✅ Opened x."), "success", "Done"),
    (Conclusion.of_run(ran(), "✅ Opened x."), "success", "Done"),  # nothing to verify
    (Conclusion.of_run(ran(verification=FAILED), "⚠️ Opened x as a draft"), "failure", "Verification failed"),
    (Conclusion.of_run(ran("max_turns", state="incomplete"), "⚠️ Opened x as a draft"), "failure",
     "Stopped before done"),
    (Conclusion.of_run(ran("interrupted", state="incomplete"), "⚠️ Opened x as a draft"), "cancelled", "Interrupted"),
    (Conclusion.of_job("failed", "❌ decode-bot could not finish"), "failure", "Failed"),
    (Conclusion.of_run(ran(state="no_changes"), "🤷 decode-bot made no changes."), "neutral", "No changes"),
    (Conclusion.of_job("skipped", "the fork runs only in an isolating sandbox"), "neutral", "Skipped"),
])
def test_each_ending_has_the_contracts_conclusion(conclusion, expected, title):
    assert outcome(conclusion) == expected
    state = completed(conclusion, str, details_url=None, external_id="e")
    assert (state.status, state.conclusion, state.title) == ("completed", expected, title)


def test_the_output_has_the_summary_redacted_the_verification_with_tails_and_the_figures():
    secret = "ghs_" + "s" * 36
    conclusion = Conclusion.of_run(ran(verification=FAILED, summary=f"Used {secret}."),
                                   "⚠️ Opened x as a draft.\n\nmore")
    state = completed(conclusion, lambda text: text.replace(secret, "[REDACTED]"), details_url="https://d/runs/1",
                      external_id="e")
    assert state.summary == "⚠️ Opened x as a draft.\n\nUsed [REDACTED]." and secret not in state.text
    assert "- ❌ `make test` (3.0s): exit code 2" in state.text and "- ✅ `make lint` (0.4s)" in state.text
    assert "````text\nE   assert 5 > 5\n```\nFAILED test_weekend\n````" in state.text  # a fence the tail cannot close
    assert "| 3 |" in state.text and "$0.12" in state.text and state.details_url == "https://d/runs/1"


def test_an_output_past_githubs_limit_is_cut():
    state = completed(Conclusion.of_run(ran(summary="x" * 100_000), "✅"), str, details_url=None,
                      external_id="e")
    assert len(state.summary) <= LIMIT and state.summary.endswith("[… cut at GitHub's limit]")
