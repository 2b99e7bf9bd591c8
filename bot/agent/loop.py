"""The agent loop: ask the model, run its tool calls in the sandbox, repeat.

The run ends when the model answers without a tool call (that answer is the
summary), at the first budget cap (turns, tokens, USD or wall clock), or at an
interrupt (Ctrl-C, or SIGTERM where the entry point turns it into one). A cap, a
model error or an interrupt never throws the work away: the loop returns what it
has, marked with the reason, and the pipeline hands the workspace back as usual.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.agent.tools import TOOL_SCHEMAS, call_tool
from bot.config import Budget
from bot.core.errors import DecodeError
from bot.model import Model, Reply, Usage
from bot.model.pricing import cost_usd
from bot.model.thinking import ThinkingPlan
from bot.sandbox import Sandbox

MAX_OUTPUT_TOKENS = 16_000  # room for the answer; thinking gets its budget on top (bot.model.thinking)
NO_THINKING = ThinkingPlan(None, MAX_OUTPUT_TOKENS)

STOP_MESSAGES = {
    "completed": "the agent finished",
    "max_turns": "stopped at the turn limit",
    "max_tokens": "stopped at the token budget",
    "max_cost": "stopped at the cost budget",
    "wall_clock": "stopped at the time limit",
    "error": "stopped by an error",
    "interrupted": "stopped by an interrupt",
}


class Recorder(Protocol):
    def record(self, type: str, **fields: Any) -> None: ...


@dataclass
class AgentResult:
    """How a run ended, with its figures."""

    stop_reason: str  # one of STOP_MESSAGES
    summary: str
    turns: int = 0
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    seconds: float = 0.0
    error: str | None = None

    @property
    def completed(self) -> bool:
        return self.stop_reason == "completed"

    @property
    def failed(self) -> bool:
        """The model or the sandbox failed (after retries): the run failed, whatever it got done."""
        return self.stop_reason == "error"

    @property
    def exit_code(self) -> int:
        """0 finished, 1 failed, 3 stopped by a budget cap, 130 interrupted (the work is kept in every case)."""
        if self.stop_reason == "interrupted":
            return 130
        return 0 if self.completed else 1 if self.failed else 3


@dataclass
class _Meter:
    budget: Budget
    started: float = field(default_factory=time.monotonic)
    turns: int = 0
    usage: Usage = field(default_factory=Usage)
    cost: float = 0.0

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def exceeded(self) -> str | None:
        b = self.budget
        if self.turns >= b.max_turns:
            return "max_turns"
        if self.usage.total >= b.max_tokens:
            return "max_tokens"
        if self.cost >= b.max_cost_usd:
            return "max_cost"
        if self.elapsed() >= b.max_wall_s:
            return "wall_clock"
        return None


def run_agent(
    *,
    model: Model,
    sandbox: Sandbox,
    system: str,
    task: str,
    budget: Budget,
    recorder: Recorder,
    prices: dict[str, dict[str, float]] | None = None,
    progress: Callable[[str], None] = lambda line: None,
    redact: Callable[[str], str] = lambda text: text,
    before_finish: Callable[[bool], str | None] | None = None,
    started: float | None = None,
    thinking: ThinkingPlan = NO_THINKING,
) -> AgentResult:
    """Drive `model` on `task` with tools running in `sandbox` until done or capped.

    Tool output passes through `redact` whole, before it is truncated and before the
    model or the transcript sees it: even where the sandbox can read a secret
    (`local` mode), the model cannot.

    `before_finish` is asked at every answer without a tool call, told whether the
    budget leaves room for another turn: a message it returns then goes back to the
    model as one more user turn (the pipeline names what the hand-back would leave
    out, once, and feeds failing `verify` commands back, up to `verify_rounds`); it
    decides when to stop asking for more by returning None. The wall
    clock counts from `started` (a `time.monotonic()` value; the pipeline passes the
    run's start, so setup time counts), else from now. `thinking` is how the model is asked to think
    (`plan_thinking`; its thinking blocks go back in the conversation as received), and a long answer is
    told in `progress` lines and `model_progress` events while it streams.
    """
    meter = _Meter(budget) if started is None else _Meter(budget, started=started)  # from the run's start
    messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
    last_text = ""
    sent = 0
    try:  # an interrupt abandons the model request or tool call in flight; the work so far is kept
        while True:
            if reason := meter.exceeded():
                return _finish(meter, reason, last_text, recorder, progress)
            try:
                reply = _ask(model, system, messages, sent, meter, recorder, prices, thinking, progress)
            except DecodeError as e:
                return _finish(meter, "error", last_text, recorder, progress, error=str(e))
            sent = len(messages)
            messages.append({"role": "assistant", "content": reply.content})
            last_text = reply.text or last_text
            if not reply.tool_uses:
                can_continue = not meter.exceeded()
                follow_up = before_finish(can_continue) if before_finish is not None else None
                if follow_up and can_continue:
                    messages.append({"role": "user", "content": follow_up})
                    continue
                return _finish(meter, "completed", reply.text, recorder, progress)
            try:
                results = _call_tools(reply.tool_uses, sandbox, meter, recorder, progress, redact)
            except DecodeError as e:
                return _finish(meter, "error", last_text, recorder, progress, error=f"sandbox failed: {e}")
            messages.append({"role": "user", "content": results})

    except KeyboardInterrupt:
        return _finish(meter, "interrupted", last_text, recorder, progress)


def _ask(model: Model, system: str, messages: list[dict[str, Any]], sent: int, meter: _Meter, recorder: Recorder,
         prices: dict[str, dict[str, float]] | None, thinking: ThinkingPlan, progress: Callable[[str], None]) -> Reply:
    """One model turn, recorded (the request with the messages after the first `sent`), counted in `meter`.
    A `DecodeError` (the model failed after its retries) propagates."""
    turn = meter.turns + 1
    recorder.record(
        "model_request", turn=turn, system=system if sent == 0 else None,
        new_messages=messages[sent:], tools=[t["name"] for t in TOOL_SCHEMAS], max_tokens=thinking.max_tokens,
    )
    began = time.monotonic()

    def streaming(phase: str, tokens: int) -> None:
        recorder.record("model_progress", turn=turn, phase=phase, tokens=tokens)
        progress(f"turn {turn:>3} | {phase}… {tokens:,} tokens ({time.monotonic() - began:.0f}s)")

    reply = model.complete(system=system, messages=messages, tools=TOOL_SCHEMAS, max_tokens=thinking.max_tokens,
                           thinking=thinking.request, on_stream=streaming)
    meter.turns += 1
    meter.usage += reply.usage
    turn_cost = cost_usd(reply.model or model.name, reply.usage, prices)
    meter.cost += turn_cost
    recorder.record(
        "model_response", turn=meter.turns, content=reply.content, stop_reason=reply.stop_reason,
        usage=_usage_dict(reply.usage), cost_usd=turn_cost, duration_s=time.monotonic() - began,
        request_id=reply.request_id,
    )
    return reply


def _call_tools(uses: list[dict[str, Any]], sandbox: Sandbox, meter: _Meter, recorder: Recorder,
                progress: Callable[[str], None], redact: Callable[[str], str]) -> list[dict[str, Any]]:
    """Run one turn's tool calls in the sandbox, recorded; their `tool_result` blocks for the next message.
    A failed command is an observation; a `DecodeError` (the sandbox itself failed) propagates."""
    results = []
    for use in uses:
        recorder.record("tool_call", turn=meter.turns, id=use["id"], name=use["name"], input=use.get("input"))
        began = time.monotonic()
        obs = call_tool(sandbox, use["name"], use.get("input"), time_left=meter.budget.max_wall_s - meter.elapsed(),
                        redact=redact)
        took = time.monotonic() - began
        recorder.record("tool_result", turn=meter.turns, id=use["id"], name=use["name"],
                        output=obs.text, is_error=obs.is_error, duration_s=took)
        progress(_progress_line(meter, use, took, obs.is_error))
        results.append({"type": "tool_result", "tool_use_id": use["id"],
                        "content": obs.text or "(no output)", "is_error": obs.is_error})
    return results


def _finish(meter: _Meter, reason: str, text: str, recorder: Recorder,
            progress: Callable[[str], None], error: str | None = None) -> AgentResult:
    if reason == "completed":
        summary = text or "(the agent finished without a summary)"
    else:
        label = "Failed" if reason == "error" else "Incomplete"
        summary = f"**{label}: {STOP_MESSAGES[reason]}.**" + (f" {error}" if error else "")
        if text:
            summary += f"\n\nThe agent's last words:\n\n{text}"
    result = AgentResult(reason, summary, meter.turns, meter.usage, meter.cost, meter.elapsed(), error)
    recorder.record("run_end", stop_reason=reason, summary=summary, turns=meter.turns,
                    usage=_usage_dict(meter.usage), cost_usd=meter.cost, wall_s=result.seconds, error=error)
    progress(f"done: {STOP_MESSAGES[reason]} after {meter.turns} turns, "
             f"{meter.usage.total:,} tokens, ${meter.cost:.4f}, {result.seconds:.1f}s")
    return result


def _usage_dict(u: Usage) -> dict[str, int]:
    return {"input_tokens": u.input_tokens, "output_tokens": u.output_tokens,
            "cache_read_tokens": u.cache_read_tokens, "cache_creation_tokens": u.cache_creation_tokens}


def _progress_line(meter: _Meter, use: dict[str, Any], took: float, failed: bool) -> str:
    args = use.get("input") or {}
    detail = args.get("command") or args.get("path") or args.get("pattern") or json.dumps(args)[:60]
    detail = str(detail).splitlines()[0][:80] if str(detail) else ""
    mark = " (failed)" if failed else ""
    return (f"turn {meter.turns:>3} | {use['name']:<5} {detail}{mark} ({took:.1f}s) | "
            f"{meter.usage.total:,} tok | ${meter.cost:.4f} | {meter.elapsed():.0f}s")
