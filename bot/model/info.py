"""What the harness needs to know about a model: its context window, its output cap and what it supports.

The Models API says it (GET /v1/models/{model_id}: `max_input_tokens`, `max_tokens`
and `capabilities`, https://docs.anthropic.com/en/api/models-get); `AnthropicModel.info`
asks once per endpoint and model in a process. Where an endpoint has no Models API
(Bedrock, Vertex, a compatible proxy) or the lookup fails, `built_in` stands in,
by model family, and `source` says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DEFAULT_WINDOW = 200_000
FAMILY_OUTPUT = (  # (id fragment, max output tokens, extended thinking), most specific first
    ("claude-3-5", 8_192, False), ("claude-3-haiku", 4_096, False), ("claude-3-opus", 4_096, False),
    ("claude-3-7", 64_000, True), ("claude-opus-4-0", 32_000, True), ("claude-opus-4-1", 32_000, True),
    ("claude", 64_000, True),
)


@dataclass(frozen=True)
class ModelInfo:
    """A model's limits and capabilities, and where they were learnt (`models-api` or `built-in`)."""

    id: str
    window: int = DEFAULT_WINDOW  # max_input_tokens: the largest prompt the model takes
    max_output: int = 8_192  # max_tokens: the largest answer
    thinking: bool = False  # extended thinking with a caller-set budget (type `enabled`)
    adaptive_thinking: bool = False  # type `adaptive`: the model decides how much to think
    context_edits: frozenset[str] = field(default_factory=frozenset)  # server-side context management strategies
    source: str = "built-in"


def built_in(model_id: str) -> ModelInfo:
    """The family's figures, for an endpoint without a Models API; an id of no known family gets the
    defaults (a 200k window, 8,192 output tokens, no thinking)."""
    for fragment, max_output, thinking in sorted(FAMILY_OUTPUT, key=lambda row: -len(row[0])):
        if fragment in model_id:
            return ModelInfo(model_id, DEFAULT_WINDOW, max_output, thinking)
    return ModelInfo(model_id)


def from_models_api(data: dict[str, Any]) -> ModelInfo:
    """A Models API `ModelInfo` object (as JSON) as a `ModelInfo`; figures it leaves out come from `built_in`."""
    fallback = built_in(str(data.get("id", "")))
    capabilities = data.get("capabilities") or {}
    thinking = capabilities.get("thinking") or {}
    types = thinking.get("types") or {}
    edits = capabilities.get("context_management") or {}
    return ModelInfo(
        id=str(data.get("id", "")),
        window=int(data.get("max_input_tokens") or fallback.window),
        max_output=int(data.get("max_tokens") or fallback.max_output),
        thinking=_supported(types.get("enabled")) if types else _supported(thinking) or fallback.thinking,
        adaptive_thinking=_supported(types.get("adaptive")),
        context_edits=frozenset(name for name, support in edits.items() if name != "supported" and _supported(support)),
        source="models-api",
    )


def _supported(support: Any) -> bool:
    return isinstance(support, dict) and support.get("supported") is True
