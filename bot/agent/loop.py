"""The agent loop: ask the model, run its tool calls in the sandbox, repeat.

The run ends when the model answers without a tool call (that answer is the
summary), at the first budget cap (turns, tokens, USD, wall clock; or the disk or the
memory: the backend stops the sandbox and the call says so, and before an answer is
accepted the sandbox is asked once more), or at an
interrupt (Ctrl-C, or SIGTERM where the entry point turns it into one). A cap, a
model error or an interrupt never throws the work away: the loop returns what it
has, marked with the reason, and the pipeline hands the workspace back as usual.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.agent.context import Context, Trim
from bot.agent.purse import Purse
from bot.agent.tools import DEFAULT_TOOLS, Toolset
from bot.config import Budget
from bot.core.errors import DecodeError
from bot.model import Model, ModelInfo, PromptTooLong, Reply, Usage
from bot.model.pricing import cost_usd
from bot.model.thinking import ThinkingPlan
from bot.sandbox import Sandbox
from bot.sandbox.protocol import CapReached, SandboxLost

MAX_OUTPUT_TOKENS = 16_000  # room for the answer (at most a quarter of a small window); thinking gets more
SUMMARY_SYSTEM = (
    "You condense the history of a coding agent's session so that it can go on without the full history. "
    "Write the summary it will continue from: what it found (files, functions, causes, with paths and names), "
    "what it changed and where, the commands it ran and what they showed (failures, test names, numbers), "
    "and what is left to do. Plain prose and lists, no preamble."
)

STOP_MESSAGES = {
    "completed": "the agent finished",
    "max_turns": "stopped at the turn limit",
    "max_tokens": "stopped at the token budget",
    "max_cost": "stopped at the cost budget",
    "wall_clock": "stopped at the time limit",
    "max_disk": "stopped at the disk cap",
    "max_memory": "stopped at the memory cap",
    "error": "stopped by an error",
    "interrupted": "stopped by an interrupt",
    "sandbox_lost": "stopped: the sandbox died and the run could not go on in a new one",
}
NO_SUMMARY = "(the agent finished without a summary)"  # the summary when its last turn said nothing


class Recorder(Protocol):
    def record(self, type: str, **fields: Any) -> object: ...


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
    trims: int = 0  # times the conversation was trimmed to fit the model's window (bot/agent/context.py)

    @property
    def completed(self) -> bool:
        return self.stop_reason == "completed"

    @property
    def answered(self) -> bool:
        """The agent completed with words of its own last (what a planning run is for)."""
        return self.completed and self.summary != NO_SUMMARY

    @property
    def failed(self) -> bool:
        """The model or the sandbox failed (after retries): the run failed, whatever it got done."""
        return self.stop_reason == "error"

    @property
    def exit_code(self) -> int:
        """0 finished, 1 failed, 3 stopped by a budget cap or a sandbox lost past its restarts, 130 interrupted
        (the work is kept in every case)."""
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
    trims: int = 0
    purse: Purse | None = None  # the cost cap this run shares with others (a best-of-N run's attempts)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def spend(self, usd: float) -> None:
        self.cost += usd
        if self.purse is not None:
            self.purse.spend(usd)

    def exceeded(self) -> str | None:
        b = self.budget
        if self.turns >= b.max_turns:
            return "max_turns"
        if self.usage.total >= b.max_tokens:
            return "max_tokens"
        if self.cost >= b.max_cost_usd or self.purse is not None and self.purse.spent_out():
            return "max_cost"
        if self.elapsed() >= b.max_wall_s:
            return "wall_clock"
        return None


def answer_room(info: ModelInfo) -> int:
    """The `max_tokens` a turn leaves for its answer on `info`'s model, thinking aside: at most a quarter of the
    window, so a small window keeps room for the conversation."""
    return min(MAX_OUTPUT_TOKENS, info.window // 4, info.max_output)


def run_agent(
    *,
    model: Model,
    sandbox: Sandbox,
    system: str,
    task: str,
    budget: Budget,
    recorder: Recorder,
    prices: Mapping[str, Mapping[str, float]] | None = None,
    progress: Callable[[str], None] = lambda line: None,
    redact: Callable[[str], str] = lambda text: text,
    before_finish: Callable[[bool], str | None] | None = None,
    started: float | None = None,
    thinking: ThinkingPlan | None = None,
    info: ModelInfo | None = None,
    after_tools: Callable[[], None] = lambda: None,
    tools: Toolset = DEFAULT_TOOLS,
    purse: Purse | None = None,
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
    told in `progress` lines and `model_progress` events while it streams. `info` is the model's figures when the
    caller has them already (the pipeline asks once, to plan thinking from them too), else they are asked here.
    `after_tools` runs after each turn's tool calls (the pipeline checkpoints a copied workspace there,
    bot/run/restart.py); a `SandboxLost` from a call, or a `CapReached` from a call or from `before_finish`,
    stops the run as incomplete, its work kept. `tools` is what the model is offered and how each call runs (the
    run's `Toolset`), the same every turn. `purse` is a cost cap shared with runs going on at once (bot/agent/
    purse.py): each turn's cost is paid from it too, and the run stops at `max_cost` when it is spent out.
    """
    meter = _Meter(budget, purse=purse) if started is None else _Meter(budget, started=started, purse=purse)
    messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
    info = model.info() if info is None else info
    thinking = thinking or ThinkingPlan(None, answer_room(info))
    context = Context.of(info.window, thinking.max_tokens, system, tools.schemas, info.context_edits)
    turn = _Turn(model, system, meter, recorder, prices, progress, context, thinking.request, tools.schemas)
    return _converse(turn, messages, tools, sandbox, redact, before_finish, after_tools)


def _converse(turn: _Turn, messages: list[dict[str, Any]], tools: Toolset, sandbox: Sandbox,
              redact: Callable[[str], str], before_finish: Callable[[bool], str | None] | None,
              after_tools: Callable[[], None]) -> AgentResult:
    """`run_agent`'s loop: a model turn, its tool calls (carried out by `tools`), again, until an answer is
    accepted or a cap, an error or an interrupt ends it; the result, recorded."""
    meter, last_text = turn.meter, ""
    try:  # an interrupt abandons the model request or tool call in flight; the work so far is kept
        while True:
            if reason := meter.exceeded():
                return turn.finish(reason, last_text)
            try:
                reply = turn.ask(messages)
            except DecodeError as e:
                return turn.finish("error", last_text, error=str(e))
            messages.append({"role": "assistant", "content": reply.content})
            last_text = reply.text or last_text
            if not reply.tool_uses:
                sandbox.check_caps()  # a cap passed by the last call and not seen yet ends the run, not "done"
                can_continue = not meter.exceeded()
                follow_up = before_finish(can_continue) if before_finish is not None else None
                if follow_up and can_continue:
                    messages.append({"role": "user", "content": follow_up})
                    continue
                return turn.finish("completed", reply.text)
            try:
                results = _call_tools(reply.tool_uses, tools, sandbox, meter, turn.recorder, turn.progress, redact)
            except CapReached:
                raise
            except SandboxLost as e:
                return turn.finish("sandbox_lost", last_text, error=str(e))
            except DecodeError as e:
                return turn.finish("error", last_text, error=f"sandbox failed: {e}")
            messages.append({"role": "user", "content": results})
            after_tools()
    except KeyboardInterrupt:
        return turn.finish("interrupted", last_text)
    except CapReached as e:  # the backend stopped the sandbox (the disk, the memory), under a call or a check
        return turn.finish(e.stop_reason, last_text, error=str(e))


@dataclass
class _Turn:
    """Asks the model for the next turn with the conversation trimmed to fit its window (`Context`)."""

    model: Model
    system: str
    meter: _Meter
    recorder: Recorder
    prices: Mapping[str, Mapping[str, float]] | None
    progress: Callable[[str], None]
    context: Context
    thinking: dict[str, Any] | None  # the request's `thinking` (None: off); a summary never thinks
    tools: list[dict[str, Any]]  # the toolset's schemas, built once: every request carries the same
    sent: int = 0  # messages the model has seen: the transcript records only the ones after them

    def ask(self, messages: list[dict[str, Any]]) -> Reply:
        """The model's answer to `messages`, trimmed first when the next prompt would pass the threshold and
        again, harder, after each "prompt is too long" answer. A `DecodeError` when the model fails, or when
        the API refuses a conversation with nothing left to trim."""
        self._record(self.context.fit(messages, self._summarise), "estimate")
        while True:
            try:
                reply = _ask(self.model, self.system, messages, self.sent, self.meter, self.recorder, self.prices,
                             max_tokens=self.context.max_tokens, tools=self.tools, thinking=self.thinking,
                             progress=self.progress,
                             context_management=self.context.management(messages))
                break
            except PromptTooLong as e:
                trim = self.context.shrink(messages, self._summarise)
                if trim is None:
                    raise DecodeError(f"{e}: nothing is left to trim (the task, the instructions and the latest "
                                      "turn alone pass the model's window)", status=e.status) from None
                self._record([trim], "prompt_too_long")
        server = self.context.seen(messages, reply.usage.total_input, reply.context_edits)
        self._record([server] if server else [], "context_editing")
        self.sent = len(messages)
        return reply

    def finish(self, reason: str, text: str, error: str | None = None) -> AgentResult:
        """The run's result for stop `reason`, with the agent's last `text`: recorded and told."""
        return _finish(self.meter, reason, text, self.recorder, self.progress, error)

    def _summarise(self, text: str, max_tokens: int) -> str:
        """The summary of older turns: one more model turn, recorded and counted like the others."""
        prompt = [{"role": "user", "content": text}]
        reply = _ask(self.model, SUMMARY_SYSTEM, prompt, 0, self.meter, self.recorder, self.prices,
                     max_tokens=max_tokens, tools=[], purpose="context_summary")
        return reply.text

    def _record(self, trims: list[Trim], reason: str) -> None:
        for trim in trims:
            self.meter.trims += 1
            self.sent = max(0, self.sent - trim.dropped)
            cleared = {"cleared_tool_uses": trim.cleared} if trim.kind == "server" else {}
            self.recorder.record(
                "context_trim", turn=self.meter.turns, reason=reason, kind=trim.kind, trimmed=trim.trimmed,
                tokens_before=trim.tokens_before, tokens_after=trim.tokens_after, window=self.context.window,
                summary=trim.summary or None, **cleared)
            what = {"summary": "older turns summarised",
                    "server": f"the API cleared {len(trim.trimmed)} more old tool results"}.get(
                trim.kind, f"{len(trim.trimmed)} old tool results trimmed")
            self.progress(f"context: {what} (~{trim.tokens_before:,} -> ~{trim.tokens_after:,} tokens, "
                          f"window {self.context.window:,})")


def _ask(model: Model, system: str, messages: list[dict[str, Any]], sent: int, meter: _Meter, recorder: Recorder,
         prices: Mapping[str, Mapping[str, float]] | None, *, max_tokens: int,
         tools: list[dict[str, Any]], purpose: str | None = None, thinking: dict[str, Any] | None = None,
         progress: Callable[[str], None] | None = None, context_management: dict[str, Any] | None = None) -> Reply:
    """One model turn, recorded (the request with the messages after the first `sent`, and the context edits it
    asks of the API; `purpose` marks a harness's own request, such as a context summary), counted in `meter`.
    While a long answer streams, it is told in `progress` lines and `model_progress` events. A `DecodeError`
    (the model failed after its retries) propagates."""
    turn = meter.turns + 1
    recorder.record(
        "model_request", turn=turn, system=system if sent == 0 else None,
        new_messages=messages[sent:], tools=[t["name"] for t in tools], max_tokens=max_tokens,
        **({"purpose": purpose} if purpose else {}),
        **({"context_management": context_management} if context_management else {}),
    )
    began = time.monotonic()

    def streaming(phase: str, tokens: int) -> None:
        recorder.record("model_progress", turn=turn, phase=phase, tokens=tokens)
        if progress is not None:
            progress(f"turn {turn:>3} | {phase}… {tokens:,} tokens ({time.monotonic() - began:.0f}s)")

    reply = model.complete(system=system, messages=messages, tools=tools, max_tokens=max_tokens,
                           thinking=thinking, on_stream=streaming, context_management=context_management)
    meter.turns += 1
    meter.usage += reply.usage
    turn_cost = cost_usd(reply.model or model.name, reply.usage, prices)
    meter.spend(turn_cost)
    recorder.record(
        "model_response", turn=meter.turns, content=reply.content, stop_reason=reply.stop_reason,
        usage=_usage_dict(reply.usage), cost_usd=turn_cost, duration_s=time.monotonic() - began,
        request_id=reply.request_id, **({"purpose": purpose} if purpose else {}),
        **({"context_edits": reply.context_edits} if reply.context_edits else {}),
    )
    return reply


def _call_tools(uses: list[dict[str, Any]], tools: Toolset, sandbox: Sandbox, meter: _Meter, recorder: Recorder,
                progress: Callable[[str], None], redact: Callable[[str], str]) -> list[dict[str, Any]]:
    """Run one turn's tool calls in the sandbox, recorded; their `tool_result` blocks for the next message.
    A failed command is an observation; a `DecodeError` (the sandbox itself failed) propagates."""
    results = []
    for use in uses:
        recorder.record("tool_call", turn=meter.turns, id=use["id"], name=use["name"], input=use.get("input"))
        began = time.monotonic()
        obs = tools.call(sandbox, use["name"], use.get("input"), time_left=meter.budget.max_wall_s - meter.elapsed(),
                         redact=redact)
        took = time.monotonic() - began
        recorder.record("tool_result", turn=meter.turns, id=use["id"], name=use["name"],
                        output=obs.text, is_error=obs.is_error, duration_s=took,
                        **({"images": len(obs.images)} if obs.images else {}))
        progress(_progress_line(meter, use, took, obs.is_error))
        results.append({"type": "tool_result", "tool_use_id": use["id"],
                        "content": obs.content(), "is_error": obs.is_error})
    return results


def _finish(meter: _Meter, reason: str, text: str, recorder: Recorder,
            progress: Callable[[str], None], error: str | None = None) -> AgentResult:
    if reason == "completed":
        summary = text if text.strip() else NO_SUMMARY
    else:
        label = "Failed" if reason == "error" else "Incomplete"
        summary = f"**{label}: {STOP_MESSAGES[reason]}.**" + (f" {error}" if error else "")
        if text:
            summary += f"\n\nThe agent's last words:\n\n{text}"
    result = AgentResult(reason, summary, meter.turns, meter.usage, meter.cost, meter.elapsed(), error, meter.trims)
    recorder.record("run_end", stop_reason=reason, summary=summary, turns=meter.turns,
                    usage=_usage_dict(meter.usage), cost_usd=meter.cost, wall_s=result.seconds, error=error,
                    trims=meter.trims)
    said = STOP_MESSAGES[reason] if reason == "completed" else "stopped"  # the reason: the caller's last line
    progress(f"done: {said} after {meter.turns} turns, "
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
