"""MCP servers inside the sandbox: agentd starts each one and relays its stdio lines.

The harness is the MCP client (bot/agent/mcp.py); agentd only carries lines. `mcp_start` runs a server's
command with bash in the workspace, in a session of its own, with agentd's environment (the one every
command gets: the egress proxy's variables, no secret) plus the server's `env`. `mcp_io` writes one line to
its stdin, then reads its stdout until the answer to one of the request ids the host waits for, a request
of the server's own (the host answers it), the timeout, or the server's end. `mcp_stop` kills its group.

A server's process tree is spared when a command's leftovers are killed (`processes.kill_descendants`);
what it started in a session of its own and left behind is not. Standard library only, Python 3.8-safe.
"""

from __future__ import annotations

import json
import os
import select
import signal
import time

from .paths import Refused, Workspace
from .processes import BASH, SERVER_EXITS, SERVER_PIDS, kill_group

LINE_CAP = 16 * 1024 * 1024  # a line longer than this is not kept: its size is reported instead
CALL_CAP = 2 * LINE_CAP  # a call's output past this without the answer is cut off: an answer and as much before it
STDERR_TAIL = 2000


class Server:
    """A running server: its process, pipes, and what it has written but not yet been read as whole lines."""

    def __init__(self, pid: int, stdin: int, stdout: int, stderr: int) -> None:
        self.pid, self.stdin, self.stdout, self.stderr = pid, stdin, stdout, stderr
        self.buffer = bytearray()
        self.skipping = 0  # bytes dropped of an over-long line, until its newline
        self.err = bytearray()
        self.err_open = True  # until its stderr's end is read
        self.status: "int | str | None" = None  # exit status once it ended (negative: a signal); "gone" when reaped elsewhere

    def read_err(self) -> None:
        while self.err_open and select.select([self.stderr], [], [], 0)[0]:
            chunk = os.read(self.stderr, 65536)
            self.err_open = bool(chunk)
            self.err = (self.err + chunk)[-STDERR_TAIL:]

    def ended(self) -> "int | str | None":
        if self.status is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # `reap` collected it
                self.status = SERVER_EXITS.pop(self.pid, "gone")
                return self.status
            if pid:
                self.status = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        return self.status


SERVERS: "dict[str, Server]" = {}  # name -> Server


def op_mcp_start(ws: Workspace, req: dict) -> dict:
    """Start server `name`: bash -c `command` in the workspace, stdin, stdout and stderr piped to agentd."""
    name = str(req["name"])
    stop(name)
    env = dict(os.environ)
    env.update({str(k): str(v) for k, v in (req.get("env") or {}).items()})
    os.chdir(ws.root)
    pipes = [os.pipe() for _ in range(3)]  # stdin, stdout, stderr
    try:
        pid = os.posix_spawn(
            BASH, [BASH, "-c", str(req["command"])], env,
            file_actions=[(os.POSIX_SPAWN_DUP2, pipes[0][0], 0), (os.POSIX_SPAWN_DUP2, pipes[1][1], 1),
                          (os.POSIX_SPAWN_DUP2, pipes[2][1], 2)],
            setsid=True, setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
        )
    except OSError as e:
        for r, w in pipes:
            os.close(r)
            os.close(w)
        raise Refused("could not start the MCP server %s: %s" % (name, e))
    for fd in (pipes[0][0], pipes[1][1], pipes[2][1]):
        os.close(fd)
    os.set_blocking(pipes[0][1], False)  # a line is written as the server takes it (`write_some`)
    SERVERS[name] = Server(pid, pipes[0][1], pipes[1][0], pipes[2][0])
    SERVER_PIDS.add(pid)
    return {"pid": pid}


def op_mcp_io(ws: Workspace, req: dict) -> dict:
    """Write `line` (if any) to server `name` while reading its lines, until one answers an id in `wait` (or is
    a request of its own), `timeout` passes or the server ends; with no id to wait for, only what is there.
    The line is written as the server takes it, its stdout and stderr read meanwhile: agentd answers one request
    at a time, and a server that reads nothing (or answers as it reads) must not hold it past `timeout`."""
    server = SERVERS.get(str(req["name"]))
    if server is None:
        raise Refused("no MCP server %s is running" % req["name"])
    wait = set(json.dumps(i) for i in (req.get("wait") or []))
    unsent = (str(req["line"]).encode() + b"\n") if req.get("line") is not None and server.ended() is None else b""
    lines: "list[str]" = []
    oversize: "list[int]" = []
    read = 0  # bytes of stdout in this call: a server that writes on and on without answering is cut off
    timed_out = False
    deadline = time.monotonic() + float(req.get("timeout") or 30)
    while True:
        if not unsent and (oversize or wait and answered(lines, wait) or not wait and not ready(server, 0)[0]):
            break
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        readable, writable = ready(server, min(left, 1.0), bool(unsent))
        if writable:
            unsent = write_some(server.stdin, unsent)
        if not readable:
            continue
        chunk = os.read(server.stdout, 1 << 20)
        if not chunk:
            wait_end(server)
            break
        read += len(chunk)
        take(server, chunk, lines, oversize)
        if read > CALL_CAP and not answered(lines, wait):
            oversize.append(read)
            del lines[:]
    server.read_err()
    status = server.ended()
    return {"lines": lines, "oversize": oversize, "timed_out": timed_out,
            "exited": status is not None, "status": status if isinstance(status, int) else None,
            "stderr": server.err.decode("utf-8", "replace")}


def op_mcp_stop(ws: Workspace, req: dict) -> dict:
    stop(str(req["name"]))
    return {}


def ready(server: Server, timeout: float, writing: bool = False) -> "tuple[bool, bool]":
    """Whether its stdout has something, and (when `writing`) its stdin takes more, within `timeout`; what it
    writes to stderr meanwhile is read (its tail kept), so a server that logs more than a pipe holds goes on."""
    readable, writable, _ = select.select([server.stdout] + [server.stderr] * server.err_open,
                                          [server.stdin] * writing, [], timeout)
    if server.stderr in readable:
        server.read_err()
    return server.stdout in readable, bool(writable)


def wait_end(server: Server) -> None:
    """A server whose stdout closed is ending: give it a moment to be reaped, so its status can be told."""
    until = time.monotonic() + 0.5
    while server.ended() is None and time.monotonic() < until:
        time.sleep(0.005)


def write_some(fd: int, data: bytes) -> bytes:
    """Write what the pipe `fd` takes now of `data` (it is non-blocking); what is left. Nothing is left when its
    reader is gone (agentd ignores SIGPIPE, bot/sandbox/agentd/rpc.py): the server's end is said by the read."""
    try:
        return data[os.write(fd, data):]
    except BlockingIOError:
        return data
    except OSError:
        return b""


def take(server: Server, chunk: bytes, lines: list, oversize: list) -> None:
    """Split `chunk` into whole lines onto `lines`; a line past LINE_CAP goes to `oversize` as its size."""
    while chunk:
        cut = chunk.find(b"\n")
        part, chunk = (chunk, b"") if cut < 0 else (chunk[:cut], chunk[cut + 1:])
        if server.skipping or len(server.buffer) + len(part) > LINE_CAP:
            server.skipping += len(server.buffer) + len(part)
            del server.buffer[:]
            if cut >= 0:
                oversize.append(server.skipping)
                server.skipping = 0
            continue
        server.buffer += part
        if cut >= 0:
            text = server.buffer.decode("utf-8", "replace").strip()
            del server.buffer[:]
            if text:
                lines.append(text)


def answered(lines: list, wait: set) -> bool:
    """Whether the last line read answers an awaited id, or is a request the host must answer first."""
    if not lines or not wait:
        return False
    try:
        message = json.loads(lines[-1])
    except ValueError:
        return False
    if not isinstance(message, dict) or "id" not in message:
        return False
    return "method" in message or json.dumps(message["id"]) in wait


def stop(name: str) -> None:
    """Kill server `name`'s process group and forget it."""
    server = SERVERS.pop(name, None)
    if server is None:
        return
    kill_group(server.pid)
    if server.ended() is None:
        try:
            os.waitpid(server.pid, 0)
        except ChildProcessError:
            pass
    SERVER_PIDS.discard(server.pid)
    SERVER_EXITS.pop(server.pid, None)
    for fd in (server.stdin, server.stdout, server.stderr):
        os.close(fd)


def stop_all() -> None:
    """Kill every server (agentd is ending)."""
    for name in list(SERVERS):
        stop(name)
