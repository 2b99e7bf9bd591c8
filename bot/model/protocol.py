"""The model protocol: what one call of the Messages API takes and gives back.

The implementations (`anthropic.py`, `scripted.py`) import this module; the
factory that picks one of them is `make_model` in `bot/model/__init__.py`,
which imports them, so the two never import each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Callable
from typing import Any, Protocol

from bot.core.errors import DecodeError
from bot.model.info import ModelInfo


StreamProgress = Callable[[str, int], None]  # (`thinking` or `writing`, about how many tokens so far)


@dataclass(frozen=True)
class Usage:
    """Token counts of one or more calls, with Anthropic's cache split."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_creation_tokens + other.cache_creation_tokens,
        )

    @property
    def total_input(self) -> int:
        """Every prompt token, cached or not."""
        return self.input_tokens + self.cache_read_tokens + self.cache_creation_tokens

    @property
    def total(self) -> int:
        return self.total_input + self.output_tokens


@dataclass(frozen=True)
class Reply:
    """One assistant turn: content blocks as plain dicts (`text`, `tool_use`, `thinking`, `redacted_thinking`),
    which go back to the API as they are."""

    content: list[dict[str, Any]]
    stop_reason: str
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    request_id: str | None = None
    context_edits: list[dict[str, Any]] = field(default_factory=list)  # what the API cleared from this prompt

    @property
    def tool_uses(self) -> list[dict[str, Any]]:
        return [b for b in self.content if b.get("type") == "tool_use"]

    @property
    def text(self) -> str:
        return "\n".join(b["text"] for b in self.content if b.get("type") == "text").strip()


class PromptTooLong(DecodeError):
    """The API refused the request as larger than the model's window: trim the conversation and ask again."""


class Model(Protocol):
    """Something that answers a Messages API request."""

    name: str

    def check(self) -> None:
        """Preflight, before any work: one cheap call that fails (`DecodeError`) on a bad key or model id."""
        ...

    def info(self) -> ModelInfo:
        """The model's window, output cap and capabilities (the Models API's, else the built-in family figures)."""
        ...

    def complete(
        self, *, system: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int,
        thinking: dict[str, Any] | None = None, on_stream: StreamProgress | None = None,
        context_management: dict[str, Any] | None = None,
    ) -> Reply:
        """One assistant turn. `thinking` is the Messages API's `thinking` parameter (None: off); `on_stream`
        hears now and then how a long answer is getting on (`thinking` or `writing`, tokens so far);
        `context_management` asks the API to clear old context itself (None: the prompt goes as it is), and
        the reply's `context_edits` says what it cleared."""
        ...
