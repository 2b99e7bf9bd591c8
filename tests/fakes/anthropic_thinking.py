"""Extended thinking, as the fake Anthropic API enforces it
(https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking).

A request with `thinking` enabled (or adaptive) must ask for a type the model has (its Models API says
which), a `budget_tokens` of at least 1024 and under `max_tokens`, and no `temperature` other than 1 nor
`top_k`. On a tool-use continuation (the last user message carries `tool_result` blocks) the last assistant
message must start with its thinking block, and every thinking block sent back must carry the signature this
fake issued for its text (an HMAC: a changed text or signature is a 400), as the real API checks them. The
fake's replies start with a signed thinking block when thinking is on, and leave thinking out when it is off.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

from tests.fakes.anthropic_rules import require

SIGNING_KEY = b"fake-anthropic-thinking-key"
MIN_BUDGET = 1024
THINKING_KINDS = ("thinking", "redacted_thinking")
GENERATED = "The task needs one more step; the tool result above tells me which."
MISSING = ("messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{found}`. When "
           "`thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the "
           "lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from "
           "previous turns. To avoid this requirement, disable `thinking`. Please consult our documentation at "
           "https://docs.claude.com/en/docs/build-with-claude/extended-thinking")


def sign(text: str) -> str:
    """The signature this fake issues for a thinking block's text."""
    return base64.b64encode(hmac.new(SIGNING_KEY, text.encode(), hashlib.sha256).digest()).decode()


def redacted_data(text: str) -> str:
    """The opaque `data` of a redacted_thinking block: the text, sealed so the fake can check it comes back
    unchanged."""
    sealed = json.dumps({"thinking": text, "mac": sign(text)})
    return base64.b64encode(sealed.encode()).decode()


def thinking_on(body: dict[str, Any]) -> bool:
    """Whether the request asks for thinking (type `enabled` or `adaptive`)."""
    thinking = body.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")


def check_thinking(body: dict[str, Any], supported: set[str]) -> None:
    """The 400s of a request that breaks the thinking rules; `supported` is what the Models API reports."""
    thinking = body.get("thinking")
    if thinking is None:
        return
    kind = thinking.get("type") if isinstance(thinking, dict) else None
    require(kind in ("enabled", "adaptive", "disabled"),
            "thinking.type: Input should be 'enabled', 'adaptive' or 'disabled'")
    if kind == "disabled":
        return
    require(kind in supported, f"thinking.type: '{kind}' thinking is not supported by {body['model']}")
    if kind == "enabled":
        budget = thinking.get("budget_tokens")
        require(type(budget) is int and budget >= MIN_BUDGET,
                f"thinking.enabled.budget_tokens: Input should be greater than or equal to {MIN_BUDGET}")
        require(budget < body["max_tokens"], "`max_tokens` must be greater than `thinking.budget_tokens`. Please "
                "consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking")
    require(body.get("temperature", 1) == 1, "`temperature` may only be set to 1 when thinking is enabled.")
    require("top_k" not in body, "`top_k` may not be set when thinking is enabled.")
    _check_signatures(body["messages"])
    _check_continuation(body["messages"])


def _check_continuation(messages: list[dict[str, Any]]) -> None:
    last = messages[-1]
    if last["role"] != "user" or isinstance(last["content"], str) or len(messages) < 2:
        return
    if not any(block["type"] == "tool_result" for block in last["content"]):
        return
    i = len(messages) - 2
    blocks = messages[i]["content"]
    first = "text" if isinstance(blocks, str) else blocks[0]["type"] if blocks else "nothing"
    require(first in THINKING_KINDS, MISSING.format(i=i, found=first))


def _check_signatures(messages: list[dict[str, Any]]) -> None:
    for i, message in enumerate(messages):
        if message["role"] != "assistant" or isinstance(message["content"], str):
            continue
        for j, block in enumerate(message["content"]):
            where = f"messages.{i}.content.{j}"
            if block["type"] == "thinking":
                require(isinstance(block.get("thinking"), str) and block.get("signature") == sign(block["thinking"]),
                        f"{where}: Invalid `signature` in `thinking` block")
            elif block["type"] == "redacted_thinking":
                require(_unsealed(block.get("data")) is not None,
                        f"{where}: Invalid `data` in `redacted_thinking` block")


def _unsealed(data: Any) -> str | None:
    try:
        sealed = json.loads(base64.b64decode(str(data)))
        text = sealed["thinking"]
    except (ValueError, TypeError, KeyError):
        return None
    return text if sealed.get("mac") == sign(text) else None


def answer_content(turn: list[dict[str, Any]], on: bool) -> list[dict[str, Any]]:
    """A scripted turn as the API would answer it: with thinking on, its own thinking blocks (signed by this
    fake) first, else a generated signed one; with thinking off, no thinking at all."""
    own = [block for block in turn if block["type"] in THINKING_KINDS]
    rest = [block for block in turn if block["type"] not in THINKING_KINDS]
    if not on:
        return rest
    signed = [{"type": "thinking", "thinking": block["thinking"], "signature": sign(block["thinking"])}
              if block["type"] == "thinking" else {"type": "redacted_thinking", "data": redacted_data(block["data"])}
              for block in own]
    return (signed or [{"type": "thinking", "thinking": GENERATED, "signature": sign(GENERATED)}]) + rest
