"""Server-side context editing in the fake Anthropic API: a request's `context_management` with the
`clear_tool_uses_20250919` strategy (https://docs.anthropic.com/en/docs/build-with-claude/context-editing).

A request carrying `context_management` needs the beta header `context-management-2025-06-27` and may name
only strategies the Models API lists for the model (else 400). When the prompt before the edit passes the
edit's `trigger` (input tokens, default 100,000; or tool uses), the tool results of every tool use but the
latest `keep` (default 3; `exclude_tools` spared) get `PLACEHOLDER` as their content, provided that frees at
least `clear_at_least` tokens; `clear_tool_inputs: true` empties those tool uses' inputs too. The window
and the cache then count the edited prompt, and the answer reports what went in
`context_management.applied_edits`. The edit is made on the server's copy for this request only: the client
keeps its whole history and sends it again next time.

Simplifications: `clear_thinking_20251015` and `compact_20260112` are accepted where the model lists them
and change nothing; `clear_tool_inputs` as a list of tool names is taken as `true`; the placeholder's text is
the fake's own.
"""

from __future__ import annotations

import copy
from typing import Any

from tests.fakes.anthropic_models import CONTEXT_EDITS
from tests.fakes.anthropic_rules import prompt_tokens, require

BETA = "context-management-2025-06-27"
PLACEHOLDER = "[tool result cleared by context management]"
DEFAULTS = {"trigger": ("input_tokens", 100_000), "keep": ("tool_uses", 3), "clear_at_least": ("input_tokens", 0)}
KINDS = {"trigger": ("input_tokens", "tool_uses"), "keep": ("tool_uses",), "clear_at_least": ("input_tokens",)}


def apply_edits(body: dict[str, Any], headers: dict[str, str], supported: set[str]
                ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The prompt the model reads (`body` itself when nothing is cleared) and the edits applied to it; the
    API's 400 for a `context_management` without the beta header, malformed, or naming a strategy the model
    does not have."""
    config = body.get("context_management")
    if config is None:
        return body, []
    betas = {b.strip() for b in headers.get("anthropic-beta", "").split(",")}
    require(BETA in betas, "context_management: Extra inputs are not permitted")
    edits = config.get("edits") if isinstance(config, dict) else None
    require(isinstance(edits, list), "context_management.edits: Input should be a valid list")
    applied: list[dict[str, Any]] = []
    for k, edit in enumerate(edits):
        kind = edit.get("type") if isinstance(edit, dict) else None
        require(kind in CONTEXT_EDITS, f"context_management.edits.{k}: Input tag '{kind}' found using 'type' does "
                f"not match any of the expected tags: {', '.join(CONTEXT_EDITS)}")
        require(kind in supported, f"context_management.edits.{k}: '{kind}' is not supported by the model "
                f"{body['model']}")
        if kind == "clear_tool_uses_20250919":
            body, done = _clear_tool_uses(body, edit, f"context_management.edits.{k}")
            applied += done
    return body, applied


def _clear_tool_uses(body: dict[str, Any], edit: dict[str, Any], where: str
                     ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """`body` with the older tool results cleared, if the trigger is passed and enough is freed."""
    trigger_kind, trigger = _threshold(edit, "trigger", where)
    _, keep = _threshold(edit, "keep", where)
    _, at_least = _threshold(edit, "clear_at_least", where)
    uses = [b for m in body["messages"] if m["role"] == "assistant" and isinstance(m["content"], list)
            for b in m["content"] if b.get("type") == "tool_use"]
    before = prompt_tokens(body)
    if (len(uses) if trigger_kind == "tool_uses" else before) <= trigger:
        return body, []
    spared = set(edit.get("exclude_tools") or [])
    cleared = {u["id"] for u in uses[:max(0, len(uses) - keep)] if u["name"] not in spared}
    edited = copy.deepcopy(body)
    for message in edited["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block.get("type") == "tool_result" and block.get("tool_use_id") in cleared:
                block["content"] = PLACEHOLDER
            elif block.get("type") == "tool_use" and block.get("id") in cleared and edit.get("clear_tool_inputs"):
                block["input"] = {}
    freed = before - prompt_tokens(edited)
    if not cleared or freed < at_least:
        return body, []
    return edited, [{"type": "clear_tool_uses_20250919", "cleared_tool_uses": len(cleared),
                     "cleared_input_tokens": freed}]


def _threshold(edit: dict[str, Any], name: str, where: str) -> tuple[str, int]:
    """The edit's `name` setting as (type, value), its default when absent; the API's 400 when malformed."""
    value = edit.get(name)
    if value is None:
        return DEFAULTS[name]
    require(isinstance(value, dict) and value.get("type") in KINDS[name],
            f"{where}.{name}.type: Input should be {' or '.join(repr(k) for k in KINDS[name])}")
    require(type(value.get("value")) is int and value["value"] >= 0,
            f"{where}.{name}.value: Input should be a non-negative integer")
    return value["type"], value["value"]
