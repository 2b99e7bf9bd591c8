"""A protocol-faithful fake of the Anthropic Messages API on 127.0.0.1.

The real `anthropic` SDK talks to it through `base_url`. It checks each request
the way https://docs.anthropic.com/en/api/messages does and answers with
Anthropic-shaped errors (https://docs.anthropic.com/en/api/errors), replies from
a scripted session (turns as in `bot.model.scripted`), streamed as Server-Sent
Events when the request asks (tests/fakes/anthropic_stream.py), enforces the
extended-thinking rules (tests/fakes/anthropic_thinking.py), applies server-side context editing where
a request asks for it and the model has it (tests/fakes/anthropic_edits.py), injects faults on
demand (before the answer, or mid-stream) and counts tokens with the prefix rules of
https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching.

Simplifications: a block costs len(json.dumps(block)) // 4 tokens (at least 1),
thinking blocks of earlier turns included (the real API leaves them out of the
count); cache entries never expire; the minimum cacheable prefix is
`min_cache_tokens` (0 by default, where the real API asks for 1024 or more).
"""

from __future__ import annotations

import hashlib
import json
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
from tests.fakes.anthropic_edits import apply_edits
from tests.fakes.anthropic_models import model_info
from tests.fakes.anthropic_rules import (FAULT_TEXT, ApiError, bad, count_cache_control, prompt_blocks,
                                         prompt_tokens, require, strip_cache_control, validate)
from tests.fakes.anthropic_stream import MidStreamError, Streamed, broken_off, stream_events, write_stream
from tests.fakes.anthropic_thinking import answer_content, check_thinking, thinking_on
from tests.fakes.http import start_server, stop_server
from tests.fakes.pause import Pause

LOOKBACK = 20  # blocks the cache looks back from a breakpoint for an earlier entry

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
                 models: set[str] | None = None, window: int = 200_000, max_output: int = 64_000,
                 thinking: set[str] | None = None, context_edits: set[str] | None = None,
                 models_api: bool = True) -> None:
        """`window` is the largest prompt in tokens (larger: 400 "prompt is too long"); the Models API reports
        it with `max_output`, the thinking types (`thinking`) and server-side `context_edits` the model has.
        Without `models_api` the fake is a compatible endpoint that has none: every lookup is a 404."""
        self.api_key = api_key
        self.min_cache_tokens = min_cache_tokens
        self.models = models  # the model ids this key may use; None: any
        self.window, self.max_output = window, max_output
        self.thinking, self.context_edits = thinking or set(), context_edits or set()
        self.models_api = models_api
        self.model_lookups: list[Received] = []  # GET /v1/models/{id}
        self.prompt_sizes: list[int] = []  # each Messages request's prompt size in tokens, refused ones too
        self.requests: list[Received] = []  # Messages requests (POST /v1/messages)
        self.token_counts: list[Received] = []  # POST /v1/messages/count_tokens
        self.replies: list[dict[str, Any]] = []
        self.totals = Usage()
        self._turns: list[list[dict[str, Any]]] = []
        self._sessions: list[tuple[str, list[list[dict[str, Any]]]]] = []
        self._started = 0  # conversations started on sessions that share a key
        self._served = 0
        self._by_position = False
        self._pauses: dict[int, Pause] = {}
        self._faults: deque[ApiError | None] = deque()
        self._faults_at: dict[int, ApiError] = {}
        self._cache: set[str] = set()
        self._pace_s = 0.0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        # a path of its own: the harness caches what the Models API said per base URL and process, and a later
        # fake on a port an earlier one used must not be taken for it
        self.prefix = "/fake-" + uuid.uuid4().hex[:12]

    @property
    def url(self) -> str:
        """Base URL for the SDK, e.g. http://127.0.0.1:PORT/fake-0123abcd."""
        assert self._server is not None, "the fake is not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}{self.prefix}"

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

    def sessions(self, sessions: dict[str, list[Any]] | list[tuple[str, list[Any]]]) -> "FakeAnthropic":
        """Replace the session by several, as `scripted:` files hold them (bot/model/scripted.py): a request
        gets, for its place in its conversation, the turn of the session whose key occurs in its first user
        message (the task), so concurrent runs of different tasks each replay their own. Several sessions
        under one key (given as a list of pairs) are attempts of one task: each new conversation takes the
        next in turn, and keeps it (it is known by its first answer, so those must differ)."""
        pairs = list(sessions.items()) if isinstance(sessions, dict) else list(sessions)
        with self._lock:
            self._sessions = [(when, [normalize_turn(t, i) for i, t in enumerate(turns)]) for when, turns in pairs]
            self._turns, self._served, self._by_position, self._started = [], 0, True, 0
        return self

    def pause(self, position: int) -> Pause:
        """Hold the next request at conversation `position` (0 = the first turn) until released."""
        pause = Pause()
        with self._lock:
            self._pauses[position] = pause
        return pause

    def pace(self, seconds: float) -> "FakeAnthropic":
        """Wait `seconds` before each event of a streamed answer: a slow answer."""
        self._pace_s = seconds
        return self

    def inject(self, status: int = 529, *, retry_after: float | None = None, retry_after_ms: int | None = None,
               message: str | None = None, error_type: str | None = None, disconnect: bool = False,
               times: int = 1, at: int | None = None, mid_stream: bool = False) -> "FakeAnthropic":
        """Queue `times` error answers (or dropped connections) before the next real reply; `mid_stream`: a
        streamed request gets a 200 and the answer's first events, then the error as an `error` event. With
        `at`, every Messages request at that conversation position (0 = the first turn) gets the error
        instead, for good: an outage that starts mid-run and outlasts every retry. Token counts never get
        faults."""
        headers = {"retry-after": f"{retry_after:g}"} if retry_after is not None else {}
        if retry_after_ms is not None:
            headers["retry-after-ms"] = str(retry_after_ms)
        kind = MidStreamError if mid_stream else ApiError
        fault = kind(status, message or FAULT_TEXT.get(status, "Internal server error"), error_type, headers)
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
        if method == "GET":
            return self._describe(path, headers, request_id)
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
                    if isinstance(fault, MidStreamError) and isinstance(body, dict) and body.get("stream"):
                        received.status = 200
                        return 200, extra, Streamed(broken_off(_stub(body), fault), self._pace_s)
                    raise fault
                if body is None:
                    raise bad("There was an error parsing the body of your request: expected JSON")
                validate(body)
                self._check_model(body["model"])
                check_thinking(body, self.thinking)
                edited, applied = apply_edits(body, headers, self.context_edits)
                self._check_window(edited)
                if self._sessions:
                    self._turns = self._session_for(body)
                if self._by_position:
                    self._served = min(_position(body), len(self._turns))
                if self._served >= len(self._turns):
                    raise ApiError(500, f"fake Anthropic API: the script is exhausted after {len(self._turns)} "
                                        f"turns; request {len(self.requests)} has no scripted reply")
                reply = self._reply(body, request_id, edited, applied)
            except Exception as failure:
                e = failure if isinstance(failure, ApiError) else ApiError(500, f"fake Anthropic API bug: {failure!r}")
                received.status = e.status
                extra.update(e.headers)
                error = {"type": e.error_type, "message": e.message}
                return e.status, extra, {"type": "error", "error": error, "request_id": request_id}
            received.status = 200
            return 200, extra, Streamed(stream_events(reply), self._pace_s) if body.get("stream") else reply

    def _session_for(self, body: dict[str, Any]) -> list[list[dict[str, Any]]]:
        """The turns of the session whose key occurs in the request's first user message; of several, the next
        in turn for a new conversation, else the one whose first turn the conversation holds."""
        messages = body.get("messages") or [{}]
        first = json.dumps(messages[0].get("content"), ensure_ascii=False)
        found = [turns for when, turns in self._sessions if json.dumps(when, ensure_ascii=False)[1:-1] in first]
        if len(found) > 1 and _position(body) == 0:
            self._started += 1
            return found[(self._started - 1) % len(found)]
        if len(found) > 1:
            answered = _essence(messages[1].get("content"))
            found = [turns for turns in found if _essence(turns[0]) == answered] or found[:0]
        if not found:
            raise ApiError(500, "fake Anthropic API: no scripted session matches the request's conversation")
        return found[0]

    def _count(self, body: Any) -> dict[str, Any]:
        """POST /v1/messages/count_tokens (https://docs.anthropic.com/en/api/messages-count-tokens): the
        request is checked like a Messages request without `max_tokens`; the answer is `{"input_tokens": N}`."""
        if body is None:
            raise bad("There was an error parsing the body of your request: expected JSON")
        require(isinstance(body, dict) and "max_tokens" not in body, "max_tokens: Extra inputs are not permitted")
        validate({**body, "max_tokens": 1})
        self._check_model(body["model"])
        return {"input_tokens": prompt_tokens(body)}

    def _describe(self, path: str, headers: dict[str, str], request_id: str) -> tuple[int, dict, Any]:
        """GET /v1/models/{model_id}: the model's `ModelInfo` (tests/fakes/anthropic_models.py)."""
        with self._lock:
            received = Received("GET", path, headers, None)
            self.model_lookups.append(received)
            model_id = path.split("?")[0].removeprefix("/v1/models/")
            try:
                self._check_key(headers)
                if "/" in model_id or not path.startswith("/v1/models/") or not self.models_api:
                    raise ApiError(404, f"Not Found: GET {path}")
                self._check_model(model_id)
            except ApiError as e:
                received.status = e.status
                return e.status, {"request-id": request_id}, {
                    "type": "error", "error": {"type": e.error_type, "message": e.message}, "request_id": request_id}
            received.status = 200
            return 200, {"request-id": request_id}, model_info(
                model_id, window=self.window, max_output=self.max_output, thinking=self.thinking,
                context_edits=self.context_edits)

    def _check_window(self, body: dict[str, Any]) -> None:
        """The API's 400 for a prompt over the model's window (the tools and the system prompt count)."""
        tokens = prompt_tokens(body)
        self.prompt_sizes.append(tokens)
        require(tokens <= self.window, f"prompt is too long: {tokens} tokens > {self.window} maximum")

    def _check_model(self, model: str) -> None:
        # The API's answer for a model id the key cannot use: 404 not_found_error "model: <id>".
        if self.models is not None and model not in self.models:
            raise ApiError(404, f"model: {model}")

    def _check_route_and_headers(self, method: str, path: str, headers: dict[str, str]) -> None:
        if method != "POST" or path.split("?")[0] not in ("/v1/messages", "/v1/messages/count_tokens"):
            raise ApiError(404, f"Not Found: {method} {path}")
        self._check_key(headers)
        if not headers.get("content-type", "").startswith("application/json"):
            raise bad("content-type: must be application/json")

    def _check_key(self, headers: dict[str, str]) -> None:
        # The docs name x-api-key; SDK 2.x sends the same key as a Bearer token.
        key = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ").strip()
        if not key:
            raise ApiError(401, "x-api-key header is required")
        if key != self.api_key:
            raise ApiError(401, "invalid x-api-key")
        if not headers.get("anthropic-version"):
            raise bad("anthropic-version: header is required")

    def _reply(self, body: dict[str, Any], request_id: str, edited: dict[str, Any], applied: list[dict[str, Any]]
               ) -> dict[str, Any]:
        """The next scripted turn as a `message`, its usage counted on the prompt as the model read it
        (`edited`: after the context edits `applied`, reported when the request asked for any)."""
        content = answer_content(json.loads(json.dumps(self._turns[self._served])), thinking_on(body))
        self._served += 1
        usage = self._account(edited)
        usage["output_tokens"] = max(1, len(json.dumps(content)) // 4)
        self.totals += Usage(usage["input_tokens"], usage["output_tokens"],
                             usage["cache_read_input_tokens"], usage["cache_creation_input_tokens"])
        reply = {
            "id": "msg_" + uuid.uuid4().hex[:24], "type": "message", "role": "assistant", "model": body["model"],
            "content": content, "stop_sequence": None, "usage": usage,
            "stop_reason": "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn",
        }
        if "context_management" in body:
            reply["context_management"] = {"applied_edits": applied}
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


def _essence(content: Any) -> list[tuple[Any, ...]]:
    """An answer's blocks without their ids: what tells one scripted session's first turn from another's."""
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
    return [(b.get("type"), b.get("text"), b.get("name"), json.dumps(b.get("input"), sort_keys=True)) for b in blocks]


def _stub(body: dict[str, Any]) -> dict[str, Any]:
    """The start of an answer that an error breaks off."""
    return {"id": "msg_" + uuid.uuid4().hex[:24], "type": "message", "role": "assistant", "model": body["model"],
            "content": [{"type": "text", "text": "Looking at the failing test first, then"}],
            "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 0}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        headers = {k.lower(): v for k, v in self.headers.items()}
        fake = self.server.fake  # type: ignore[attr-defined]
        path = self.path.removeprefix(getattr(fake, "prefix", ""))  # the Bedrock and Vertex gateways have none
        answer = fake.handle(self.command, path, headers, raw)
        if answer is None:
            self.close_connection = True
            return
        status, extra, payload = answer
        if isinstance(payload, Streamed):
            write_stream(self, payload, extra)
            return
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
