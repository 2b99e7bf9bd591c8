"""Self-review (`review: true` in decode.yml): after the agent's last answer and `verify:`, a read-only pass over
the task and the diff; what it finds that matters goes back to the agent once, then the run publishes.

The pass is the same loop (`run_agent`) with the read-only toolset, the same model and sandbox, on the run's wall
clock (it stops where the run would), with the run's token and cost caps and at most `REVIEW_TURNS` turns of its
own; the fix it asks for is one more turn of the agent's, within the agent's caps. It answers with findings, one per line, `- [high|medium|low] what and where`, and a
last line `VERDICT: clean` or `VERDICT: changes`. High and medium findings go back to the agent as one more user
turn; low ones are only reported. Its events are in the run's transcript as `review_*` events, its turns and cost
are added to the run's figures (`Outcome.spent`), and `Outcome.line` is what the PR body and the check run say.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from bot.agent.loop import AgentResult, run_agent
from bot.agent.prompt import fence_untrusted
from bot.agent.purse import Purse
from bot.agent.tools import READ_ONLY_TOOLS
from bot.config import Budget
from bot.core.errors import DecodeError
from bot.model import Model
from bot.run.transcript import Transcript
from bot.sandbox import Sandbox

FINDING = re.compile(r"^\s*[-*]?\s*\[(high|medium|low)\]\s*(.+?)\s*$", re.I | re.M)
MATTERS = ("high", "medium")
REVIEW_TURNS = 10  # the pass's own turns at most; its wall clock is the run's, its other caps the run's too
DIFF_CHARS = 60_000
DIFF = ("git -c core.quotepath=off diff --no-color --no-ext-diff {base} -- . ; "
        "git ls-files -z -o --exclude-standard | xargs -0 -r -n1 git diff --no-color --no-index /dev/null")
SYSTEM = ("You review a change another agent made to a repository, before it is published. You can read files, "
          "search and run read-only commands; nothing you change is kept. Look for bugs, missed parts of the task, "
          "broken tests, security problems. Answer with your findings, one per line, each as "
          "`- [high|medium|low] file:line: the problem and the fix`, then a last line `VERDICT: clean` when "
          "nothing needs changing or `VERDICT: changes`.")


@dataclass(frozen=True)
class Finding:
    severity: str
    text: str


@dataclass
class Outcome:
    """What the review found and did: `verdict` (`clean`, `changes`, `unfinished` or `not run`), its findings,
    whether they went back to the agent, and the pass's own result (turns, tokens, cost)."""

    verdict: str = "not run"
    findings: tuple[Finding, ...] = ()
    sent_back: bool = False
    spent: AgentResult | None = None

    @property
    def line(self) -> str:
        """One line for the PR body, the check run and the tracking comment."""
        if self.verdict == "not run":
            return "**Self-review:** not run (the run stopped before it)."
        if self.verdict == "unfinished":
            stop = self.spent.stop_reason if self.spent is not None else "error"
            return f"**Self-review:** ⚠️ the review did not finish ({stop}); the change is published unreviewed."
        if not self.findings or self.verdict == "clean" and not any(f.severity in MATTERS for f in self.findings):
            return "**Self-review:** ✅ clean: nothing to change."
        counts = ", ".join(f"{n} {s}" for s in ("high", "medium", "low")
                           if (n := sum(f.severity == s for f in self.findings)))
        listed = "\n".join(f"- [{f.severity}] {f.text[:300]}" for f in self.findings[:20])
        fixed = "they went back to the agent once, and it answered them before publishing" if self.sent_back \
            else "only low-severity findings: none went back to the agent"
        return f"**Self-review:** found {counts}; {fixed}.\n{listed}"


@dataclass
class SelfReview:
    """The pass, run when asked (`__call__`, once); the `Outcome` in `outcome`."""

    model: Model
    sandbox: Sandbox
    base: str
    task: str
    budget: Budget
    transcript: Transcript
    redact: Callable[[str], str]
    started: float
    prices: dict[str, Any] = field(default_factory=dict)
    outcome: Outcome = field(default_factory=Outcome)
    purse: Purse | None = None  # the cost cap the run shares with others (its attempts'): the review pays from it

    def __call__(self) -> str | None:
        """Review the diff; the message for the agent when findings matter, else None. Once per run."""
        if self.outcome.verdict != "not run":
            return None
        try:
            diff = self.sandbox.run(DIFF.format(base=self.base), timeout=120)
        except DecodeError as e:  # the sandbox died: the agent's own loop meets that next, the review says so
            self.outcome = Outcome("unfinished", spent=AgentResult("error", "", error=str(e)))
            self.transcript.record("note", text=self.outcome.line)
            return None
        text = self.redact(diff.output)[:DIFF_CHARS]
        task = ("Review this change. The task it was made for:\n" + fence_untrusted(self.task, "task") +
                "\n\nThe diff against the base:\n" + fence_untrusted(text or "(empty)", "diff"))
        budget = replace(self.budget, max_turns=min(self.budget.max_turns, REVIEW_TURNS))
        spent = run_agent(model=self.model, sandbox=self.sandbox, system=SYSTEM, task=task, budget=budget,
                          recorder=_Renamed(self.transcript), prices=self.prices, redact=self.redact,
                          started=self.started, tools=READ_ONLY_TOOLS, purse=self.purse)
        findings = tuple(Finding(m.group(1).lower(), m.group(2)) for m in FINDING.finditer(spent.summary))
        verdict = "clean" if re.search(r"VERDICT:\s*clean", spent.summary, re.I) else "changes"
        if verdict == "changes" and not findings:  # asked for changes in its own words: those go back
            findings = (Finding("medium", " ".join(spent.summary.split())[:1000] or "(no reason given)"),)
        if not spent.completed:
            findings, verdict = (), "unfinished"
        matter = [f for f in findings if f.severity in MATTERS]
        self.outcome = Outcome(verdict, findings, bool(matter), spent)
        self.transcript.record("review", verdict=verdict, findings=[vars(f) for f in findings],
                               sent_back=bool(matter), turns=spent.turns, cost_usd=spent.cost_usd)
        self.transcript.record("note", text=self.outcome.line)
        if not matter:
            return None
        listed = "\n".join(f"- [{f.severity}] {f.text}" for f in matter)
        return ("Before your answer is accepted, a review of your diff found these problems:\n" +
                fence_untrusted(listed, "review findings") +
                "\n\nFix the ones that are real (this is the only review), then answer again with your summary, "
                "saying what you changed because of the review.")


class _Renamed:
    """The transcript, with the review pass's events under `review_` names: its `run_end` is not the run's."""

    def __init__(self, transcript: Transcript) -> None:
        self.transcript = transcript

    def record(self, type: str, **fields: Any) -> None:  # noqa: A002 - the Recorder protocol's name
        self.transcript.record(f"review_{type}" if type in ("run_end", "run_start") else type, **fields)


def with_review(agent: AgentResult, outcome: Outcome) -> AgentResult:
    """`agent`'s result with the review pass's turns, tokens and cost added: the run's figures count both."""
    spent = outcome.spent
    if spent is None:
        return agent
    return replace(agent, turns=agent.turns + spent.turns, usage=agent.usage + spent.usage,
                   cost_usd=agent.cost_usd + spent.cost_usd, trims=agent.trims + spent.trims)
