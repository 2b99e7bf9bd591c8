"""Extended thinking: what `DECODE_THINKING` (or decode.yml's `thinking`) asks, resolved against what the model
supports (`ModelInfo`, from the Models API).

`on` (the default) is adaptive thinking where the model has it (the model decides how much to think), else a
fixed budget of `DEFAULT_BUDGET` tokens where it has budgeted thinking, else off without a note (the run record
says `off`); a number is that budget, and a model without thinking is said once. The request's
`max_tokens` covers the thinking and the answer, so it is the budget plus the usual answer room, within the
model's output cap (https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.config.table import MIN_THINKING_BUDGET
from bot.model.info import ModelInfo

DEFAULT_BUDGET = 10_000  # `on` for a model with budgeted thinking only


@dataclass(frozen=True)
class ThinkingPlan:
    """The `thinking` request parameter (None: off), the request's `max_tokens`, and a note to say once when the
    setting could not be had as asked (None when it was)."""

    request: dict[str, Any] | None
    max_tokens: int
    note: str | None = None

    @property
    def label(self) -> str:
        """`off`, `adaptive` or `budget 10,000 tokens`: for the transcript's run record."""
        if self.request is None:
            return "off"
        if self.request["type"] == "adaptive":
            return "adaptive"
        return f"budget {self.request['budget_tokens']:,} tokens"


def plan_thinking(setting: str | int, info: ModelInfo, answer_tokens: int) -> ThinkingPlan:
    """How to ask `info`'s model for `setting` (`on`, `off` or a budget), leaving `answer_tokens` for the answer."""
    cap = min(answer_tokens, info.max_output)
    if setting == "off":
        return ThinkingPlan(None, cap)
    if setting == "on" and info.adaptive_thinking:
        return ThinkingPlan({"type": "adaptive"}, min(answer_tokens + DEFAULT_BUDGET, info.max_output))
    if not info.thinking:  # `on` (the default) means "where the model has it": off without a word
        note = None if setting == "on" else (f"a thinking budget of {setting:,} tokens was asked for, but {info.id} "
                                             f"does not support extended thinking (as the {info.source} figures "
                                             "say): thinking is off for this run")
        return ThinkingPlan(None, cap, note)
    budget = DEFAULT_BUDGET if setting == "on" else int(setting)
    max_tokens = min(budget + answer_tokens, info.max_output)
    if budget < max_tokens:
        return ThinkingPlan({"type": "enabled", "budget_tokens": budget}, max_tokens)
    fitted = max_tokens // 2
    if fitted < MIN_THINKING_BUDGET:
        return ThinkingPlan(None, cap, f"{info.id} writes at most {info.max_output:,} tokens, too few for the "
                                       f"smallest thinking budget ({MIN_THINKING_BUDGET:,}): thinking is off")
    return ThinkingPlan({"type": "enabled", "budget_tokens": fitted}, max_tokens,
                        f"a thinking budget of {budget:,} tokens does not fit under {info.id}'s output cap of "
                        f"{info.max_output:,} tokens: thinking with {fitted:,}")
