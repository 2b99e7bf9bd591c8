"""Streamed answers of the fake Anthropic API: a Messages reply as Server-Sent Events, in the order and shapes of
https://docs.anthropic.com/en/api/messages-streaming.

`message_start` (the message with empty content and the input usage), a `ping`, then per content block a
`content_block_start`, its deltas (`text_delta`, `input_json_delta`, `thinking_delta` then `signature_delta`)
and a `content_block_stop`; `message_delta` (stop reason, output usage, and the beta API's
`context_management` when the reply has it) and `message_stop`. An overload
injected mid-stream (`MidStreamError`) sends the first events of the answer and then an `error` event, as the
API does when it fails after answering 200.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, ClassVar

from tests.fakes.anthropic_rules import ApiError

CHUNK = 24  # characters per delta


class MidStreamError(ApiError):
    """An error the fake sends as an `error` event after the stream began (HTTP 200)."""


@dataclass
class Streamed:
    """A streamed answer: its events, and how long the fake waits before each one (`pace_s`)."""

    events: list[tuple[str, dict[str, Any]]]
    pace_s: float = 0.0
    content_type: ClassVar[str] = "text/event-stream; charset=utf-8"

    def chunks(self) -> list[bytes]:
        """The events as SSE frames: `event: NAME` and `data: JSON`, a blank line after each."""
        return [f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in self.events]


def stream_events(reply: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The events that stream `reply` (a Messages API `message` object)."""
    usage = reply["usage"]
    start = {**reply, "content": [], "stop_reason": None, "stop_sequence": None,
             "usage": {**usage, "output_tokens": 1}}
    managed = {"context_management": reply["context_management"]} if "context_management" in reply else {}
    if managed:
        start["context_management"] = None
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": start}),
                                                ("ping", {"type": "ping"})]
    for index, block in enumerate(reply["content"]):
        events += block_events(index, block)
    events += [
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": reply["stop_reason"], "stop_sequence": None},
                           "usage": {"output_tokens": usage["output_tokens"]}, **managed}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return events


def block_events(index: int, block: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """One content block: its start, its deltas, its stop."""
    kind = block["type"]
    if kind == "text":
        opening, deltas = {"type": "text", "text": ""}, [{"type": "text_delta", "text": t} for t in _cut(block["text"])]
    elif kind == "tool_use":
        opening = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        deltas = [{"type": "input_json_delta", "partial_json": t} for t in _cut(json.dumps(block.get("input", {})))]
    elif kind == "thinking":
        opening = {"type": "thinking", "thinking": ""}
        deltas = [{"type": "thinking_delta", "thinking": t} for t in _cut(block["thinking"])]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    else:  # redacted_thinking: whole in its start event
        opening, deltas = dict(block), []
    return ([("content_block_start", {"type": "content_block_start", "index": index, "content_block": opening})]
            + [("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d}) for d in deltas]
            + [("content_block_stop", {"type": "content_block_stop", "index": index})])


def broken_off(reply: dict[str, Any], error: ApiError) -> list[tuple[str, dict[str, Any]]]:
    """The first events of `reply`, then the `error` event that ends the stream."""
    begun = stream_events(reply)[:4]
    return begun + [("error", {"type": "error", "error": {"type": error.error_type, "message": error.message}})]


def write_stream(handler: Any, streamed: Streamed, headers: dict[str, str]) -> None:
    """Send `streamed` on `handler` (a BaseHTTPRequestHandler) as its `content_type`, chunked, pausing
    `pace_s` before each event."""
    handler.send_response(200)
    handler.send_header("content-type", streamed.content_type)
    handler.send_header("cache-control", "no-cache")
    handler.send_header("transfer-encoding", "chunked")
    for name, value in headers.items():
        handler.send_header(name, value)
    handler.end_headers()
    try:
        for chunk in streamed.chunks():
            if streamed.pace_s:
                time.sleep(streamed.pace_s)
            handler.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            handler.wfile.flush()
        handler.wfile.write(b"0\r\n\r\n")
        handler.wfile.flush()
    except (BrokenPipeError, ConnectionResetError):  # the client gave up on the stream
        handler.close_connection = True


def _cut(text: str) -> list[str]:
    return [text[i:i + CHUNK] for i in range(0, len(text), CHUNK)] or [""]
