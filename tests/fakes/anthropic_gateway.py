"""A cloud provider's endpoint in front of a `FakeAnthropic` (tests/fakes/anthropic_bedrock.py, anthropic_vertex.py).

Served over HTTP by the wrapped fake's own handler class, which calls `handle(...)`: a gateway records each request
it receives, unwraps the provider's request into a Messages API one and `forward`s it to the wrapped fake exactly as
Anthropic's own API would receive it, so validation, scripted turns and token accounting stay the wrapped fake's.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.anthropic_api import FakeAnthropic, Received
from tests.fakes.anthropic_api import _Handler as JsonHandler  # answers with `server.fake.handle(...)`
from tests.fakes.http import Served


@dataclass
class Gateway(Served):
    """The wrapped fake (`messages`), the provider's requests as received, and the way into the wrapped fake."""

    messages: FakeAnthropic
    requests: list[Received] = field(default_factory=list)  # the provider's requests, as `handle` records them
    _lock: threading.Lock = field(default_factory=threading.Lock)
    handler = JsonHandler

    def record(self, method: str, path: str, headers: dict[str, str], raw: bytes,
               into: list[Received] | None = None) -> None:
        """Keep one request, in `requests` or `into` (a log of the provider's own, like a token endpoint's)."""
        with self._lock:
            (self.requests if into is None else into).append(Received(method, path, headers, raw))

    def forward(self, path: str, body: dict[str, Any]) -> tuple[int, dict, Any] | None:
        """The wrapped fake's answer to `body` POSTed at `path` (`/v1/messages`, `/v1/messages/count_tokens`)
        with the Anthropic API's own headers: (status, headers, JSON body or a stream), or None to drop the
        connection."""
        return self.messages.handle("POST", path, {
            "x-api-key": self.messages.api_key, "anthropic-version": "2023-06-01",
            "content-type": "application/json"}, json.dumps(body).encode())
