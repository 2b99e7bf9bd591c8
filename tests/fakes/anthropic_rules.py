"""The Messages API's request rules, as the fake Anthropic API enforces them.

Validation answers the 400 the real API gives
(https://docs.anthropic.com/en/api/messages, https://docs.anthropic.com/en/api/errors);
`prompt_blocks` lists a prompt in cache order for the token accounting.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_BREAKPOINTS = 4
FAULT_TEXT = {429: "Number of request tokens has exceeded your per-minute rate limit", 529: "Overloaded"}
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
ERROR_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
    404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 529: "overloaded_error",
}


class ApiError(Exception):
    """An error answer: HTTP status, the API's message and extra response headers."""

    def __init__(self, status: int, message: str, error_type: str | None = None, headers: dict | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}
        self.error_type = error_type or ERROR_TYPES.get(status, "api_error")


def bad(message: str) -> ApiError:
    return ApiError(400, message)


def require(ok: bool, message: str) -> None:
    """Raise the API's 400 with `message` unless `ok`."""
    if not ok:
        raise bad(message)


def validate(body: Any) -> None:
    """Raise the 400 the real API gives for a malformed Messages request."""
    require(isinstance(body, dict), "body: Input should be a valid dictionary")
    require(isinstance(body.get("model"), str) and body["model"], "model: Field required")
    max_tokens = body.get("max_tokens")
    require(max_tokens is not None, "max_tokens: Field required")
    require(type(max_tokens) is int and max_tokens > 0, "max_tokens: Input should be a positive integer")
    require(isinstance(body.get("stream", False), bool), "stream: Input should be a valid boolean")
    tools = body.get("tools", [])
    _check_tools(tools)
    _check_system(body.get("system"))
    _check_messages(body.get("messages"), has_tools=bool(tools))
    found = count_cache_control([tools, body.get("system"), body["messages"]]) + bool(body.get("cache_control"))
    require(found <= MAX_BREAKPOINTS,
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {found}.")


def _check_tools(tools: Any) -> None:
    require(isinstance(tools, list), "tools: Input should be a valid list")
    names: set[str] = set()
    for k, tool in enumerate(tools):
        require(isinstance(tool, dict), f"tools.{k}: Input should be a valid dictionary")
        name = tool.get("name")
        require(isinstance(name, str) and TOOL_NAME.match(name) is not None,
                f"tools.{k}.name: String should match pattern '{TOOL_NAME.pattern}'")
        if tool.get("type", "custom") == "custom":
            schema = tool.get("input_schema")
            require(isinstance(schema, dict), f"tools.{k}.custom.input_schema: Field required")
            require(schema.get("type") == "object", f"tools.{k}.custom.input_schema.type: Input should be 'object'")
        require(name not in names, "tools: Tool names must be unique.")
        names.add(name)


def _check_system(system: Any) -> None:
    if system is None or isinstance(system, str):
        return
    require(isinstance(system, list), "system: Input should be a valid string or list of text blocks")
    for k, block in enumerate(system):
        require(isinstance(block, dict) and block.get("type") == "text" and str(block.get("text", "")).strip() != "",
                f"system.{k}: text content blocks must contain non-whitespace text")


def _check_messages(messages: Any, *, has_tools: bool) -> None:
    # Pairing rules: https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use
    require(isinstance(messages, list) and len(messages) > 0, "messages: at least one message is required")
    pending: set[str] = set()
    seen: set[str] = set()
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        require(role in ("user", "assistant"), f"messages.{i}.role: Input should be 'user' or 'assistant'")
        require(i > 0 or role == "user", 'messages: first message must use the "user" role')
        require(i == 0 or role != messages[i - 1]["role"], 'messages: roles must alternate between "user" and '
                f'"assistant", but found multiple "{role}" roles in a row')
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        require(isinstance(blocks, list) and all(isinstance(b, dict) and "type" in b for b in blocks),
                f"messages.{i}.content: Input should be a valid list of content blocks")
        require(len(blocks) > 0 or (role == "assistant" and i == len(messages) - 1), f"messages.{i}: all messages "
                "must have non-empty content except for the optional final assistant message")
        answered: set[str] = set()
        for j, block in enumerate(blocks):
            kind, where = block["type"], f"messages.{i}.content.{j}"
            if kind == "text":
                require(isinstance(block.get("text"), str) and block["text"].strip() != "",
                        f"{where}.text: text content blocks must contain non-whitespace text")
            if kind in ("tool_use", "tool_result"):
                require(has_tools, "Requests which include `tool_use` or `tool_result` blocks must define tools.")
            if kind == "tool_use":
                require(role == "assistant", f"{where}: tool_use blocks can only appear in assistant messages")
                require(isinstance(block.get("id"), str) and isinstance(block.get("name"), str)
                        and isinstance(block.get("input"), dict), f"{where}: tool_use needs an id, a name and an input")
                require(block["id"] not in seen, f"{where}: `tool_use` ids must be unique: {block['id']}")
                seen.add(block["id"])
            if kind == "tool_result":
                require(role == "user", f"{where}: tool_result blocks can only appear in user messages")
                require(block.get("tool_use_id") in pending, f"{where}: unexpected `tool_use_id` found in "
                        f"`tool_result` blocks: {block.get('tool_use_id')}. Each `tool_result` block must have a "
                        "corresponding `tool_use` block in the previous message.")
                require(j == 0 or blocks[j - 1]["type"] == "tool_result",
                        f"messages.{i}: `tool_result` blocks must come first in the content, before any other block")
                answered.add(block["tool_use_id"])
        missing = ", ".join(sorted(pending - answered))
        require(not missing, f"messages.{i - 1}: `tool_use` ids were found without `tool_result` blocks immediately "
                f"after: {missing}. Each `tool_use` block must have a corresponding `tool_result` block in the next "
                "message.")
        pending = {b["id"] for b in blocks if b["type"] == "tool_use"}


def prompt_blocks(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The prompt in cache order, tools -> system -> messages, as (section, block) pairs."""
    blocks = [("tool", tool) for tool in body.get("tools", [])]
    system = body.get("system")
    if isinstance(system, str):
        blocks += [("system", {"type": "text", "text": system})] if system else []
    else:
        blocks += [("system", block) for block in system or []]
    for message in body["messages"]:
        content = message["content"]
        content = [{"type": "text", "text": content}] if isinstance(content, str) else content
        blocks += [(message["role"], block) for block in content]
    return blocks


def prompt_tokens(body: dict[str, Any]) -> int:
    """The prompt's size in the fake's tokens: a block costs len(json.dumps(block)) // 4, at least 1."""
    return sum(max(1, len(json.dumps(strip_cache_control(b))) // 4) for _, b in prompt_blocks(body))


def strip_cache_control(value: Any) -> Any:
    """`value` without any `cache_control` keys: the marker is not part of the cached content."""
    if isinstance(value, dict):
        return {k: strip_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip_cache_control(v) for v in value]
    return value


def count_cache_control(value: Any) -> int:
    """How many objects inside `value` carry `cache_control`."""
    if isinstance(value, dict):
        return ("cache_control" in value) + sum(count_cache_control(v) for v in value.values())
    if isinstance(value, list):
        return sum(count_cache_control(v) for v in value)
    return 0
