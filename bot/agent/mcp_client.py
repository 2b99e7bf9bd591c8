"""The harness's MCP client: initialize (the protocol version negotiated), tools/list, tools/call.

One client over two channels: `SandboxChannel`, a server started inside the run's sandbox whose stdio lines
agentd relays (bot/sandbox/agentd/mcp.py), and `HttpChannel`, an operator's remote server over streamable
HTTP, called from the host with the operator's headers.

The messages are the official SDK's (`mcp.types`: every answer is validated as the protocol's type, the
versions are its registry). Its `ClientSession` is not used: it is asynchronous and owns a receive loop over a
stream pair, while the sandbox's channel is agentd's synchronous request/answer wire that tool calls share (a
session per server would need an event loop thread and a bridge onto that wire, and a thread hop on every
call). The client here sends one request at a time and reads until its answer, which is all a tool call needs.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from typing import Any, Protocol

import requests
import urllib3

from bot.config import RemoteMcp
from bot.sandbox.protocol import Sandbox

CLIENT_INFO = {"name": "decode-bot", "version": "0.1.0"}
LINE_CAP_MB = 16  # agentd's LINE_CAP: a longer answer is not carried, nor a longer remote response
CHUNK = 65536  # the most one read of a remote server's response takes


class ServerGone(Exception):
    """The server cannot be used any more (did not start, answered garbage, timed out, died); says why."""


class TimedOut(ServerGone):
    """No answer came in time (the client names the request)."""


class ToolFailed(Exception):
    """The server answered a request with a JSON-RPC error, or an answer too large to carry: the server is fine."""


class Channel(Protocol):
    """A way to a server: send one message, and get back the messages that came until the answer to `wait`."""

    def exchange(self, sandbox: Sandbox | None, message: dict[str, Any] | None, wait: int | None,
                 timeout: float) -> list[dict[str, Any]]: ...

    def close(self, sandbox: Sandbox | None) -> None: ...


class SandboxChannel:
    """Server `name` inside the sandbox, its stdio relayed by agentd (`Sandbox.mcp_io`)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def exchange(self, sandbox: Sandbox | None, message: dict[str, Any] | None, wait: int | None,
                 timeout: float) -> list[dict[str, Any]]:
        assert sandbox is not None
        got = sandbox.mcp_io(self.name, None if message is None else json.dumps(message),
                             [] if wait is None else [wait], timeout)
        messages = [_message(line) for line in got.lines]
        for size in got.oversize:
            messages.append({"jsonrpc": "2.0", "id": wait, "error": {
                "code": -32603, "message": f"the server's answer was {size / 1024 / 1024:.0f} MB, more than the "
                                           f"{LINE_CAP_MB} MB one answer may be: ask for less"}})
        answered = wait is None or any(m.get("id") == wait or "method" in m for m in messages)
        if not answered and got.exited:
            status = "" if got.status is None else f" with status {got.status}"
            said = got.stderr.strip().splitlines()[-1][:300] if got.stderr.strip() else "nothing on stderr"
            raise ServerGone(f"it exited{status} ({said})")
        if not answered and got.timed_out:
            raise TimedOut()
        return messages

    def close(self, sandbox: Sandbox | None) -> None:
        if sandbox is not None:
            sandbox.mcp_stop(self.name)


class HttpChannel:
    """An operator's remote server over streamable HTTP (an answer as JSON, or as an SSE stream)."""

    def __init__(self, server: RemoteMcp) -> None:
        self.url = server.url
        self.headers = {**dict(server.headers), "Accept": "application/json, text/event-stream"}
        self.http = requests.Session()

    def exchange(self, sandbox: Sandbox | None, message: dict[str, Any] | None, wait: int | None,
                 timeout: float) -> list[dict[str, Any]]:
        if message is None:  # over HTTP an answer comes only in its request's response, which ended without it
            raise ServerGone("its response ended without the answer")
        deadline = time.monotonic() + timeout  # each read has `timeout`; a server that keeps writing, it in all
        try:
            with self.http.post(self.url, json=message, headers=self.headers, timeout=timeout, stream=True,
                                allow_redirects=False) as answer:
                if answer.status_code >= 400:
                    raise ServerGone(f"it answered HTTP {answer.status_code}")
                if session := answer.headers.get("mcp-session-id"):
                    self.headers["Mcp-Session-Id"] = session
                if answer.status_code == 202 or wait is None:
                    return []
                if answer.headers.get("content-type", "").startswith("text/event-stream"):
                    return self._events(lines(chunks(answer.raw, deadline)), wait, timeout)
                body = json.loads(b"".join(chunks(answer.raw, deadline)))
        except (requests.Timeout, urllib3.exceptions.TimeoutError):
            raise TimedOut() from None
        except (requests.RequestException, urllib3.exceptions.HTTPError) as e:
            raise ServerGone(f"it could not be reached ({type(e).__name__})") from None
        except ValueError:
            raise ServerGone("it answered something that is not JSON-RPC") from None
        messages = body if isinstance(body, list) else [body]
        self._negotiated(messages)
        return [m for m in messages if isinstance(m, dict)]

    def _events(self, lines: Iterator[str], wait: int, timeout: float) -> list[dict[str, Any]]:
        """The SSE stream's messages until the answer to `wait`; a request of the server's is refused on the way
        (this client offers no sampling, roots or elicitation)."""
        messages: list[dict[str, Any]] = []
        for line in lines:
            if not line.startswith("data:") or not line[5:].strip():
                continue
            message = _message(line[5:].strip())
            if "method" in message and "id" in message:
                self.exchange(None, refusal(message), None, timeout)
                continue
            messages.append(message)
            if message.get("id") == wait:
                break
        self._negotiated(messages)
        return messages

    def _negotiated(self, messages: list[Any]) -> None:
        for m in messages:
            version = m.get("result", {}).get("protocolVersion") if isinstance(m, dict) and \
                isinstance(m.get("result"), dict) else None
            if isinstance(version, str):
                self.headers["MCP-Protocol-Version"] = version

    def close(self, sandbox: Sandbox | None) -> None:
        self.http.close()


def chunks(raw: Any, deadline: float) -> Iterator[bytes]:
    """A streamed response's body (urllib3's, decoded) as it arrives, each read returning what has come; a
    `TimedOut` once `deadline` passes, however often the server writes (SSE keep-alives, a trickle), and
    `ToolFailed` past the LINE_CAP_MB a sandbox server's answer may have (the harness holds a response whole)."""
    size = 0
    while chunk := raw.read1(CHUNK, decode_content=True):
        size += len(chunk)
        if size > LINE_CAP_MB * 2**20:
            raise ToolFailed(f"the server's answer passed {LINE_CAP_MB} MB, more than one answer may be: ask for less")
        yield chunk
        if time.monotonic() > deadline:
            raise TimedOut()


def lines(body: Iterator[bytes]) -> Iterator[str]:
    """The lines of `body` (SSE ends them with LF, CRLF or CR) as soon as each is whole."""
    pending = bytearray()
    for chunk in body:
        pending += chunk
        if b"\n" in chunk or b"\r" in chunk:
            *whole, rest = bytes(pending).replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
            pending = bytearray(rest)
            yield from (line.decode("utf-8", "replace") for line in whole)
    if pending:
        yield pending.decode("utf-8", "replace")


def _message(line: str) -> dict[str, Any]:
    try:
        message = json.loads(line)
    except ValueError:
        message = None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        raise ServerGone(f"it answered something that is not JSON-RPC: {line[:120]!r}")
    return message


def refusal(request: dict[str, Any]) -> dict[str, Any]:
    """The answer to a request of the server's: this client offers no sampling, roots or elicitation."""
    return {"jsonrpc": "2.0", "id": request["id"],
            "error": {"code": -32601, "message": f"decode-bot's client does not offer {request.get('method')}"}}


class McpClient:
    """One server's client: one request at a time over `channel`."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.ids = itertools.count(1)
        self.version = ""

    def request(self, sandbox: Sandbox | None, method: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        """The result of `method`; `ToolFailed` for an error answer, `ServerGone` when none comes in `timeout`."""
        request_id = next(self.ids)
        outgoing: list[dict[str, Any]] = [{"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}]
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimedOut(f"it did not answer {method} within {timeout:.0f}s")
            try:
                got = self.channel.exchange(sandbox, outgoing.pop(0) if outgoing else None, request_id, left)
            except TimedOut:
                raise TimedOut(f"it did not answer {method} within {timeout:.0f}s") from None
            for message in got:
                if "method" in message and "id" in message:
                    outgoing.append(refusal(message))
                elif message.get("id") == request_id:
                    if isinstance(message.get("error"), dict):
                        raise ToolFailed(str(message["error"].get("message") or "an error")[:2000])
                    if not isinstance(message.get("result"), dict):
                        raise ServerGone(f"its answer to {method} holds no result")
                    return message["result"]

    def initialize(self, sandbox: Sandbox | None, timeout: float) -> list[Any]:
        """The handshake, then the server's tools (every page of tools/list), as `mcp.types.Tool`s."""
        from mcp.types import InitializeResult, ListToolsResult
        from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION
        deadline = time.monotonic() + timeout
        result = self._typed(InitializeResult, self.request(sandbox, "initialize", {
            "protocolVersion": LATEST_HANDSHAKE_VERSION, "capabilities": {}, "clientInfo": CLIENT_INFO}, timeout))
        if result.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
            raise ServerGone(f"it speaks MCP {result.protocol_version!r}; decode-bot's client speaks "
                             f"{', '.join(HANDSHAKE_PROTOCOL_VERSIONS)}")
        self.version = result.protocol_version
        try:  # the handshake has `timeout` in all
            self.channel.exchange(sandbox, {"jsonrpc": "2.0", "method": "notifications/initialized"}, None,
                                  max(deadline - time.monotonic(), 0.1))
        except TimedOut:
            raise TimedOut(f"it did not take notifications/initialized within {timeout:.0f}s") from None
        tools: list[Any] = []
        cursor = None
        while True:
            page = self._typed(ListToolsResult, self.request(
                sandbox, "tools/list", {"cursor": cursor} if cursor else {}, max(deadline - time.monotonic(), 0.1)))
            tools += page.tools
            cursor = page.next_cursor
            if not cursor or len(tools) > 1000:
                return tools

    def call(self, sandbox: Sandbox | None, tool: str, arguments: dict[str, Any], timeout: float) -> Any:
        """tools/call, as an `mcp.types.CallToolResult`."""
        from mcp.types import CallToolResult
        return self._typed(CallToolResult, self.request(sandbox, "tools/call",
                                                        {"name": tool, "arguments": arguments}, timeout))

    @staticmethod
    def _typed(kind: Any, result: dict[str, Any]) -> Any:
        from pydantic import ValidationError
        try:
            return kind.model_validate(result)
        except ValidationError as e:
            raise ServerGone(f"its answer is not a valid {kind.__name__}: {str(e).splitlines()[0][:200]}") from None
