"""The verification gate: decode.yml's `verify` commands, run after the agent's answer.

The commands run one by one in the agent's own sandbox, under the agent phase's network policy, each
with `setup_timeout` clamped by what is left of the run's wall clock. A failure goes back to the agent
as one more user turn (the command, its status and the tail of its redacted output, fenced as data),
up to `verify_rounds` times; after the last one the commands run once more and that round stands.
The agent loop asks through its `before_finish` hook (`finish_gate`), after the hand-back review.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from bot.agent.prompt import verify_feedback
from bot.core.errors import DecodeError
from bot.run.repo_config import RepoConfig
from bot.sandbox import Sandbox
from bot.sandbox.protocol import CapReached
from bot.run.transcript import Transcript

TAIL_LINES = 80  # of each failing command's output, in the feedback
TAIL_CHARS = 6000
RECORD_CHARS = 20_000  # of each command's output, in the transcript


@dataclass(frozen=True)
class Check:
    """One verify command's result in one round; `exit_code` None when it timed out or did not run; `tail`
    the end of its redacted output (what went back to the agent, and what the check run shows)."""

    command: str
    exit_code: int | None
    duration_s: float
    timed_out: bool = False
    tail: str = ""

    @property
    def passed(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    @property
    def status(self) -> str:
        """`exit code 1`, `timed out after 900s`, or `passed`."""
        if self.passed:
            return "passed"
        if self.timed_out:
            return f"timed out after {self.duration_s:.0f}s" if self.duration_s >= 1 else \
                "not started: the run's time limit (DECODE_TIMEOUT_MINUTES) was used up"
        return f"exit code {self.exit_code}" if self.exit_code is not None else "the sandbox failed"


@dataclass
class Verification:
    """What the harness verified: the last round's checks, how many rounds ran and how many went back."""

    configured: bool = False  # decode.yml has `verify:`
    checks: tuple[Check, ...] = ()  # the last round's, one per command
    rounds: int = 0  # how many times the commands ran
    feedback: int = 0  # how many failed rounds went back to the agent

    @property
    def verified(self) -> str:
        """`passed`, `failed`, or `none` (no `verify:`, or the run stopped before they ran)."""
        if not self.checks:
            return "none"
        return "passed" if all(c.passed for c in self.checks) else "failed"

    @property
    def stale(self) -> bool:
        """The last round went back to the agent and the run stopped before the commands ran again."""
        return self.rounds > 0 and self.feedback >= self.rounds

    def line(self) -> str:
        """One line for the CLI and the tracking comment."""
        if self.verified == "none":
            return "verified: none (no `verify:` in .github/decode.yml)" if not self.configured else \
                "verified: none (the run stopped before the `verify:` commands ran)"
        passed = sum(c.passed for c in self.checks)
        return (f"verified: {self.verified} ({passed} of {len(self.checks)} `verify:` commands passed, "
                f"{self.rounds} round{'s' if self.rounds != 1 else ''})")


@dataclass
class Verifier:
    """Runs the `verify` commands when asked (`__call__`) and keeps the result in `verification`."""

    sandbox: Sandbox
    config: RepoConfig
    transcript: Transcript
    progress: Callable[[str], None]
    redact: Callable[[str], str]
    deadline: float  # the run's wall clock, a time.monotonic() value
    verification: Verification = field(init=False)

    def __post_init__(self) -> None:
        self.verification = Verification(configured=bool(self.config.verify))

    def __call__(self, can_continue: bool) -> str | None:
        """Run one round; the feedback message when a command failed, the agent can take another turn and
        rounds are left; None otherwise (the round's result stands)."""
        if not self.config.verify:
            return None
        v = self.verification
        v.rounds += 1
        self.transcript.record("phase", name="verifying")
        checks, failures = [], []
        for command in self.config.verify:
            check, tail = self._run(command, v.rounds)
            checks.append(check)
            if not check.passed:
                failures.append((command, check.status, tail))
        v.checks = tuple(checks)
        self.progress(f"verify round {v.rounds}: {v.verified}")
        if not failures or not can_continue or v.feedback >= self.config.verify_rounds or \
                any(c.exit_code is None and not c.timed_out for c in checks):  # a dead sandbox takes no fix
            return None
        v.feedback += 1
        self.transcript.record("phase", name="agent")
        return verify_feedback(failures, round_no=v.feedback, rounds=self.config.verify_rounds)

    def _run(self, command: str, round_no: int) -> tuple[Check, str]:
        """One command: its check and the tail of its redacted output (redacted whole, then cut)."""
        left = self.deadline - time.monotonic()
        if left < 1:
            check, output = Check(command, None, 0.0, timed_out=True), ""
        else:
            self.progress(f"verify: {command}")
            try:
                result = self.sandbox.run(command, timeout=min(self.config.setup_timeout, left))
            except CapReached:  # the run stops at the cap (bot/agent/loop.py)
                raise
            except DecodeError as e:
                check, output = Check(command, None, 0.0), f"the sandbox failed: {e}"
            else:
                check = Check(command, result.exit_code, result.duration_s, result.timed_out)
                output = result.output
        output = self.redact(output)
        self.transcript.record("verify", command=command, round=round_no, exit_code=check.exit_code,
                               timed_out=check.timed_out, duration_s=check.duration_s, passed=check.passed,
                               output=output[-RECORD_CHARS:])
        tail = "\n".join(output.rstrip().splitlines()[-TAIL_LINES:])[-TAIL_CHARS:]
        return replace(check, tail=tail), tail


def finish_gate(review: Callable[[], str | None], verifier: Verifier,
                self_review: Callable[[], str | None] | None = None) -> Callable[[bool], str | None]:
    """The agent loop's `before_finish`: the hand-back review once (at the first answer with budget left),
    then, at every answer, the verification; once that stands, the self-review (`review: true`, which asks
    only once) while the budget leaves room for the agent to answer it."""
    reviewed = False

    def ask(can_continue: bool) -> str | None:
        nonlocal reviewed
        if can_continue and not reviewed:
            reviewed = True
            if message := review():
                return message
        if (message := verifier(can_continue)) is not None:
            return message
        return self_review() if can_continue and self_review is not None else None

    return ask
