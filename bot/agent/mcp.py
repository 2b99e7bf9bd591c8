"""A run's MCP servers, as tools: decode.yml's `mcp:` in the sandbox, and the operator's remote ones it names.

`McpServers.start` starts every server of decode.yml inside the sandbox (after setup, so under the agent's
egress policy, limits and environment: no secret) and connects the operator's remote servers (host side, with
their credentials); each one's tools are offered as `mcp__NAME__TOOL` with the server's own input schema. The
tools are fixed at the first start, in decode.yml's order and each server's, so the request's tool list (part
of the cached prompt prefix) never changes in a run; a sandbox restart starts the sandbox's servers again.

A server that does not start, answers garbage, times out or dies is said once (a `mcp_server` event in the
transcript, a line in `decode run`'s output and the tracking comment), and the run goes on without it: its
tools answer that it is gone. With `required: true` a server that does not start fails the run before the
model is asked (`McpRequired`).
"""

from __future__ import annotations

import base64
import hashlib
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from bot.agent.mcp_client import (Channel, HttpChannel, McpClient, SandboxChannel, ServerGone, TimedOut,
                                  ToolFailed)
from bot.agent.tools import Observation, Tool
from bot.config import McpSettings
from bot.core.errors import DecodeError
from bot.run.repo_config import McpServer
from bot.sandbox.protocol import Sandbox

TOOL_NAME = re.compile(r"[^a-zA-Z0-9_-]")  # the Messages API's tool names: ^[a-zA-Z0-9_-]{1,64}$
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")  # what the model takes in a tool result
IMAGE_MAX = 5 * 1024 * 1024  # the API's cap on one image, base64
Handshake = tuple[McpClient, list[Any]]  # a started server's client and its tools
LAST_S = 1.0  # the least a launched server is given for its handshake, even when others took all the time


class McpRequired(DecodeError):
    """A server decode.yml marks `required: true` did not start: the run fails before the model is asked."""

    def __init__(self, name: str, why: Exception) -> None:
        super().__init__(f"the MCP server {name} (required: true in .github/decode.yml) did not start: {why}")
        self.name = name


@dataclass
class _Server:
    spec: McpServer
    client: McpClient | None = None
    tools: dict[str, str] = field(default_factory=dict)  # offered name -> the server's own name
    down: str | None = None  # why it cannot be used now


class McpServers:
    """decode.yml's servers for one run: started with `start`, offered as `tools`, stopped with `close`."""

    def __init__(self, specs: tuple[McpServer, ...], settings: McpSettings, record: Callable[..., Any],
                 progress: Callable[[str], None]) -> None:
        self.settings, self.record, self.progress = settings, record, progress
        self.servers = [_Server(spec) for spec in specs]
        self.tools: list[Tool] = []
        self.started = False
        self.said: set[str] = set()
        self.sandbox: Sandbox | None = None

    def start(self, sandbox: Sandbox) -> None:
        """Start (again, after a restart) every server in `sandbox`; the first time, connect the remote ones and
        fix the tools. `McpRequired` when a required server does not start the first time.

        Every server is started before any is waited on, so they come up together: the sandbox's are launched,
        and the operator's are asked on threads of their own (each has its own HTTP session). The run waits about
        as long as its slowest server, and DECODE_MCP_START_SECONDS (plus at most `LAST_S` for each further
        sandbox server) when some hang, not that time for each. Events are recorded here, in decode.yml's order."""
        self.sandbox = sandbox
        servers = [s for s in self.servers if not (s.spec.operator and self.started)]
        deadline = time.monotonic() + self.settings.start_s
        launched = {s.spec.name: _launch(s.spec, sandbox) for s in servers if not s.spec.operator}
        remote = {s.spec.name: _asked(partial(self._handshake, s, None, deadline)) for s in servers if s.spec.operator}
        for server in servers:
            try:
                if (failed := launched.get(server.spec.name)) is not None:
                    raise failed
                asked = remote.get(server.spec.name)
                server.client, listed = asked.result() if asked else self._handshake(server, sandbox, deadline)
            except (ServerGone, ToolFailed, DecodeError) as e:
                server.client, server.down = None, f"did not start: {e}"
                if server.spec.required and not self.started:
                    raise McpRequired(server.spec.name, e) from None
                self._say(server)
                continue
            server.down = None
            self.record("mcp_server", name=server.spec.name, state="started", protocol=server.client.version,
                        tools=[t.name for t in listed])
            if not self.started:
                self._offer(server, listed)
        self.started = True

    def _handshake(self, server: _Server, sandbox: Sandbox | None, deadline: float) -> Handshake:
        """The handshake with `server` (launched already when in the sandbox): its client and tools. It touches
        nothing shared, so the operator's servers are asked on threads."""
        spec = server.spec
        channel: Channel
        if spec.operator:
            remote = {r.name: r for r in self.settings.servers}.get(spec.name)
            if remote is None:
                offered = ", ".join(r.name for r in self.settings.servers) or "none"
                raise ServerGone(f"the operator offers no MCP server {spec.name} (DECODE_MCP_SERVERS offers: "
                                 f"{offered})")
            channel, timeout = HttpChannel(remote), self.settings.start_s  # asked from the start, all the time
        else:  # booting since the launch: what is left of the time, and enough to read what it already said
            channel, timeout = SandboxChannel(spec.name), max(deadline - time.monotonic(), LAST_S)
        client = McpClient(channel)
        try:
            return client, client.initialize(sandbox, timeout)
        except BaseException as e:
            _quietly(lambda: channel.close(sandbox))
            if isinstance(e, TimedOut) and not spec.operator:  # it had all the start time since its launch
                raise TimedOut(f"it was not ready {self.settings.start_s:.0f}s after its start "
                               "(DECODE_MCP_START_SECONDS)") from e
            raise

    def _offer(self, server: _Server, listed: list[Any]) -> None:
        """Add `server`'s tools to the run's (named `mcp__NAME__TOOL`, sanitised and unique)."""
        taken = {t.name for t in self.tools}
        for tool in listed:
            schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
            if schema.get("type") != "object":
                schema = {"type": "object", "properties": {}}
            name = unique(offered_name(server.spec.name, tool.name), taken)
            taken.add(name)
            server.tools[name] = tool.name
            described = f"(MCP server {server.spec.name}) {tool.description or tool.title or tool.name}"
            self.tools.append(Tool({"name": name, "description": described[:4000], "input_schema": schema},
                                   self._runner(server, tool.name)))

    def _runner(self, server: _Server, tool: str) -> Callable[[Sandbox, dict[str, Any], float], Observation]:
        def run(sb: Sandbox, args: dict[str, Any], time_left: float) -> Observation:
            return self.call(server, tool, sb, args, time_left)
        return run

    def call(self, server: _Server, tool: str, sb: Sandbox, args: dict[str, Any], time_left: float) -> Observation:
        """One tools/call: its result as an observation; a server that fails it is stopped and said once."""
        name = server.spec.name
        if server.down is not None or server.client is None:
            return Observation(f"the MCP server {name} is not available ({server.down})", True)
        where = None if server.spec.operator else sb
        try:
            result = server.client.call(where, tool, args, max(min(self.settings.call_s, time_left), 1.0))
        except ToolFailed as e:
            return Observation(f"the MCP server {name} refused the call: {e}", True)
        except ServerGone as e:
            server.down, client, server.client = f"failed: {e}", server.client, None
            _quietly(lambda: client.channel.close(where))
            self._say(server)
            return Observation(f"the MCP server {name} failed: {e}; its tools are gone for the rest of the run", True)
        return observation(result)

    def _say(self, server: _Server) -> None:
        """Name the server and why it is gone, once in a run."""
        name = server.spec.name
        if name in self.said:
            return
        self.said.add(name)
        self.record("mcp_server", name=name, state="down", reason=server.down)
        self.progress(f"MCP server {name} {server.down}; the run goes on without it")

    def close(self) -> None:
        for server in self.servers:
            if (client := server.client) is not None:
                where = None if server.spec.operator else self.sandbox
                _quietly(lambda: client.channel.close(where))


def _launch(spec: McpServer, sandbox: Sandbox) -> DecodeError | None:
    """Start server `spec` in `sandbox` without waiting for it; the error when it could not be, to say in turn."""
    try:
        sandbox.mcp_start(spec.name, spec.command, dict(spec.env))
    except DecodeError as e:
        return e
    return None


def _asked(handshake: Callable[[], Handshake]) -> Future[Handshake]:
    """`handshake` under way on a daemon thread of its own: a run that fails sooner (a required server) does not
    wait for it to time out before the process can exit."""
    future: Future[Handshake] = Future()

    def ask() -> None:
        try:
            future.set_result(handshake())
        except BaseException as e:  # noqa: BLE001 - raised again by result(), in the run's thread
            future.set_exception(e)

    threading.Thread(target=ask, name="decode-mcp-remote", daemon=True).start()
    return future


def _quietly(action: Callable[[], None]) -> None:
    try:
        action()
    except Exception:  # noqa: BLE001 - stopping a server that is gone already
        pass


def offered_name(server: str, tool: str) -> str:
    """`mcp__SERVER__TOOL` with every character the API refuses as `_`, at most 64 characters (a long one keeps
    a hash of the whole, so two long names stay apart)."""
    name = TOOL_NAME.sub("_", f"mcp__{server}__{tool}")
    if len(name) <= 64:
        return name
    return name[:55] + "_" + hashlib.sha256(name.encode()).hexdigest()[:8]


def unique(name: str, taken: set[str]) -> str:
    """`name`, or, when another tool has it, `name` cut to make room for `_2`, `_3`..."""
    n = 1
    found = name
    while found in taken:
        n += 1
        found = f"{name[:64 - len(str(n)) - 1]}_{n}"
    return found


def observation(result: Any) -> Observation:
    """A `CallToolResult` as the model sees it: the text parts (a resource's text, a link's URI), the images it
    takes, the structured content when nothing else came; an error when the server says so."""
    parts: list[str] = []
    images: list[dict[str, Any]] = []
    for block in result.content:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "image" and block.mime_type in IMAGE_TYPES and len(block.data) <= IMAGE_MAX and _b64(block.data):
            images.append({"type": "image", "source": {"type": "base64", "media_type": block.mime_type,
                                                       "data": block.data}})
        elif kind == "resource" and hasattr(block.resource, "text"):
            parts.append(block.resource.text)
        elif kind == "resource_link":
            parts.append(f"[resource {block.uri}]")
        else:
            parts.append(f"[{kind or 'a'} content the model cannot take was left out]")
    if not parts and result.structured_content is not None:
        import json
        parts.append(json.dumps(result.structured_content))
    return Observation("\n".join(parts), bool(result.is_error), tuple(images))


def _b64(data: str) -> bool:
    try:
        base64.b64decode(data, validate=True)
    except ValueError:
        return False
    return True
