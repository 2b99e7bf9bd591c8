"""A protocol-faithful fake of the Anthropic Messages API on 127.0.0.1.

The real `anthropic` SDK talks to it through `base_url`. It checks each request
the way https://docs.anthropic.com/en/api/messages does and answers with
Anthropic-shaped errors (https://docs.anthropic.com/en/api/errors), replies from
a scripted session (turns as in `bot.model.scripted`), injects faults on demand
and counts tokens with the prefix rules of
https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching.

Simplifications: a block costs len(json.dumps(block)) // 4 tokens (at least 1);
cache entries never expire; the minimum cacheable prefix is `min_cache_tokens`
(0 by default, where the real API asks for 1024 or more).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import uuid
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from bot.config import DEFAULT_MODEL, Settings
from bot.model import Usage
from bot.model.scripted import normalize_turn
from tests.fakes.http import start_server, stop_server
from tests.fakes.pause import Pause

LOOKBACK = 20
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


@dataclass
class Received:
    """One request as the fake saw it, and the status it answered."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    status: int = 0


def _position(body: Any) -> int:
    """How many assistant turns the conversation in `body` already has."""
    messages = body.get("messages") if isinstance(body, dict) else None
    return sum(1 for m in messages or [] if isinstance(m, dict) and m.get("role") == "assistant")


class FakeAnthropic:
    """The fake server: start it, `script` its turns, point the SDK at `url`."""

    def __init__(self, api_key: str = "sk-ant-fake-0123456789", *, min_cache_tokens: int = 0,
                 models: set[str] | None = None) -> None:
        self.api_key = api_key
        self.min_cache_tokens = min_cache_tokens
        self.models = models  # the model ids this key may use; None: any
        self.requests: list[Received] = []  # Messages requests (POST /v1/messages)
        self.token_counts: list[Received] = []  # POST /v1/messages/count_tokens
        self.replies: list[dict[str, Any]] = []
        self.totals = Usage()
        self._turns: list[list[dict[str, Any]]] = []
        self._served = 0
        self._by_position = False
        self._pauses: dict[int, Pause] = {}
        self._faults: deque[ApiError | None] = deque()
        self._faults_at: dict[int, ApiError] = {}
        self._cache: set[str] = set()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        """Base URL for the SDK, e.g. http://127.0.0.1:PORT."""
        assert self._server is not None, "the fake is not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "FakeAnthropic":
        """Serve on a free port in a background thread."""
        self._server = start_server(_Handler, self)
        return self

    def stop(self) -> None:
        """Stop serving and close the listening socket."""
        if self._server is not None:
            stop_server(self._server)
            self._server = None

    def __enter__(self) -> "FakeAnthropic":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def script(self, turns: list[Any], *, by_position: bool = False) -> "FakeAnthropic":
        """Replace the session: the n-th successful request gets the n-th turn. With `by_position`,
        a request gets the turn for its place in its own conversation (the number of assistant
        messages it carries), so concurrent or restarted runs each replay the session from its start."""
        with self._lock:
            self._turns = [normalize_turn(t, i) for i, t in enumerate(turns)]
            self._served = 0
            self._by_position = by_position
        return self

    def pause(self, position: int) -> Pause:
        """Hold the next request at conversation `position` (0 = the first turn) until released."""
        pause = Pause()
        with self._lock:
            self._pauses[position] = pause
        return pause

    def inject(self, status: int = 529, *, retry_after: float | None = None, retry_after_ms: int | None = None,
               message: str | None = None, error_type: str | None = None, disconnect: bool = False,
               times: int = 1, at: int | None = None) -> "FakeAnthropic":
        """Queue `times` error answers (or dropped connections) before the next real reply. With `at`, every
        Messages request at that conversation position (0 = the first turn) gets the error instead, for
        good: an outage that starts mid-run and outlasts every retry. Token counts never get faults."""
        headers = {"retry-after": f"{retry_after:g}"} if retry_after is not None else {}
        if retry_after_ms is not None:
            headers["retry-after-ms"] = str(retry_after_ms)
        fault = ApiError(status, message or FAULT_TEXT.get(status, "Internal server error"), error_type, headers)
        with self._lock:
            if at is not None:
                self._faults_at[at] = fault
            else:
                self._faults.extend([None if disconnect else fault] * times)
        return self

    @property
    def remaining(self) -> int:
        """Scripted turns not served yet."""
        return len(self._turns) - self._served

    @property
    def cache_read_share(self) -> float:
        """Share of all prompt tokens so far that were read from the cache."""
        return self.totals.cache_read_tokens / self.totals.total_input if self.totals.total_input else 0.0

    def settings(self, **changes: Any) -> Settings:
        """Settings pointing at this fake with its key."""
        base = Settings(model=DEFAULT_MODEL, anthropic_api_key=self.api_key, anthropic_base_url=self.url)
        return base.replace(**changes)

    def handle(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, dict, Any] | None:
        """Answer one request: (status, headers, JSON body), or None to drop the connection."""
        request_id = "req_" + uuid.uuid4().hex[:24]
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        counting = path.split("?")[0] == "/v1/messages/count_tokens"
        pause = None if counting else self._pauses.get(_position(body))
        if pause is not None and pause.active and pause.hold():
            return None
        with self._lock:
            received = Received(method, path, headers, body)
            (self.token_counts if counting else self.requests).append(received)
            extra = {"request-id": request_id}
            try:
                self._check_route_and_headers(method, path, headers)
                if counting:
                    received.status = 200
                    return 200, extra, self._count(body)
                if (fault := self._faults_at.get(_position(body))) is not None:
                    raise fault
                if self._faults:
                    fault = self._faults.popleft()
                    if fault is None:
                        received.status = -1
                        return None
                    raise fault
                if body is None:
                    raise bad("There was an error parsing the body of your request: expected JSON")
                validate(body)
                self._check_model(body["model"])
                if self._by_position:
                    self._served = min(_position(body), len(self._turns))
                if self._served >= len(self._turns):
                    raise ApiError(500, f"fake Anthropic API: the script is exhausted after {len(self._turns)} "
                                        f"turns; request {len(self.requests)} has no scripted reply")
                reply = self._reply(body, request_id)
            except Exception as failure:
                e = failure if isinstance(failure, ApiError) else ApiError(500, f"fake Anthropic API bug: {failure!r}")
                received.status = e.status
                extra.update(e.headers)
                error = {"type": e.error_type, "message": e.message}
                return e.status, extra, {"type": "error", "error": error, "request_id": request_id}
            received.status = 200
            return 200, extra, reply

    def _count(self, body: Any) -> dict[str, Any]:
        """POST /v1/messages/count_tokens (https://docs.anthropic.com/en/api/messages-count-tokens): the
        request is checked like a Messages request without `max_tokens`; the answer is `{"input_tokens": N}`."""
        if body is None:
            raise bad("There was an error parsing the body of your request: expected JSON")
        require(isinstance(body, dict) and "max_tokens" not in body, "max_tokens: Extra inputs are not permitted")
        validate({**body, "max_tokens": 1})
        self._check_model(body["model"])
        return {"input_tokens": sum(max(1, len(json.dumps(strip_cache_control(b))) // 4)
                                    for _, b in prompt_blocks(body))}

    def _check_model(self, model: str) -> None:
        # The API's answer for a model id the key cannot use: 404 not_found_error "model: <id>".
        if self.models is not None and model not in self.models:
            raise ApiError(404, f"model: {model}")

    def _check_route_and_headers(self, method: str, path: str, headers: dict[str, str]) -> None:
        if method != "POST" or path.split("?")[0] not in ("/v1/messages", "/v1/messages/count_tokens"):
            raise ApiError(404, f"Not Found: {method} {path}")
        # The docs name x-api-key; SDK 2.x sends the same key as a Bearer token.
        key = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ").strip()
        if not key:
            raise ApiError(401, "x-api-key header is required")
        if key != self.api_key:
            raise ApiError(401, "invalid x-api-key")
        if not headers.get("anthropic-version"):
            raise bad("anthropic-version: header is required")
        if not headers.get("content-type", "").startswith("application/json"):
            raise bad("content-type: must be application/json")

    def _reply(self, body: dict[str, Any], request_id: str) -> dict[str, Any]:
        content = json.loads(json.dumps(self._turns[self._served]))
        self._served += 1
        usage = self._account(body)
        usage["output_tokens"] = max(1, len(json.dumps(content)) // 4)
        self.totals += Usage(usage["input_tokens"], usage["output_tokens"],
                             usage["cache_read_input_tokens"], usage["cache_creation_input_tokens"])
        reply = {
            "id": "msg_" + uuid.uuid4().hex[:24], "type": "message", "role": "assistant", "model": body["model"],
            "content": content, "stop_sequence": None, "usage": usage,
            "stop_reason": "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn",
        }
        self.replies.append({**reply, "request_id": request_id})
        return reply

    def _account(self, body: dict[str, Any]) -> dict[str, Any]:
        """Split the prompt into cache reads, cache writes and plain input tokens."""
        blocks = prompt_blocks(body)
        prefixes, cumulative, digest, total = [], [], hashlib.sha256(), 0
        for tag, block in blocks:
            text = json.dumps(strip_cache_control(block), sort_keys=True)
            digest.update(f"{tag}:{text}\n".encode())
            prefixes.append(digest.copy().hexdigest())
            total += max(1, len(text) // 4)
            cumulative.append(total)
        marks = {n for n, (_, block) in enumerate(blocks) if count_cache_control(block)}
        if body.get("cache_control") and blocks:
            marks.add(len(blocks) - 1)
        marks = sorted(m for m in marks if cumulative[m] >= self.min_cache_tokens)
        hit = -1
        for mark in marks:
            for n in range(mark, max(-1, mark - LOOKBACK - 1), -1):
                if prefixes[n] in self._cache:
                    hit = max(hit, n)
                    break
        read = cumulative[hit] if hit >= 0 else 0
        cached_to = cumulative[marks[-1]] if marks else 0
        self._cache.update(prefixes[m] for m in marks)
        written = max(0, cached_to - read)
        return {
            "input_tokens": total - cached_to, "cache_creation_input_tokens": written,
            "cache_read_input_tokens": read,
            "cache_creation": {"ephemeral_5m_input_tokens": written, "ephemeral_1h_input_tokens": 0},
        }


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
    require(not body.get("stream"), "stream: this fake serves only non-streaming requests")
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


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        headers = {k.lower(): v for k, v in self.headers.items()}
        answer = self.server.fake.handle(self.command, self.path, headers, raw)  # type: ignore[attr-defined]
        if answer is None:
            self.close_connection = True
            return
        status, extra, payload = answer
        data = json.dumps(payload).encode()
        self.send_response(status, "Overloaded" if status == 529 else None)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in extra.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_PUT = do_DELETE = do_POST

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    """A started fake Anthropic API; stopped after the test."""
    with FakeAnthropic() as fake:
        yield fake
