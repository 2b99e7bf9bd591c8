"""agentd's wire: JSON lines in on stdin, one JSON line answer each on stdout, and its `main`.

Requests: {"id", "op", ...}; answers: {"id", "ok": true, ...} or
{"id", "ok": false, "error": "..."}. Every failure is an answer, never a crash.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from typing import IO

from .files import op_glob, op_grep, op_read, op_write
from .handback import op_check, op_export, op_export_read
from .mcp import op_mcp_io, op_mcp_start, op_mcp_stop, stop_all
from .paths import Refused, Workspace
from .processes import become_subreaper, become_undumpable, kill_descendants, op_exec, reap
from .relay import start_egress

CHANNEL_SOCKET = "DECODE_AGENTD_SOCKET"  # where the host listens for agentd's connection, when it does

OPS = {
    "ping": lambda ws, req: {"pid": os.getpid(), "root": ws.root},
    "exec": op_exec,
    "read": op_read,
    "write": op_write,
    "glob": op_glob,
    "grep": op_grep,
    "export": op_export,
    "export_read": op_export_read,
    "check": op_check,
    "mcp_start": op_mcp_start,
    "mcp_io": op_mcp_io,
    "mcp_stop": op_mcp_stop,
}


def answer(ws: Workspace, line: bytes) -> dict:
    """The answer to one request line."""
    try:
        req = json.loads(line)
        handler = OPS[req["op"]]
    except (ValueError, KeyError, TypeError):
        return {"id": None, "ok": False, "error": "malformed request"}
    try:
        reply = handler(ws, req)
        reply["ok"] = True
    except Refused as e:
        reply = {"ok": False, "error": str(e)}
    except Exception as e:  # noqa: BLE001 - every failure is an answer, never a crash
        reply = {"ok": False, "error": "%s: %s" % (type(e).__name__, e)}
    reply["id"] = req.get("id")
    return reply


def serve(root: str, stdin: IO[bytes], stdout: IO[bytes]) -> None:
    """Answer each request line of `stdin` on `stdout`, for the workspace at `root`, until stdin ends."""
    ws = Workspace(root)
    for line in stdin:
        reap()
        stdout.write((json.dumps(answer(ws, line)) + "\n").encode())
        stdout.flush()


def main() -> int:
    """`python3 agentd.pyz WORKSPACE`: serve until stdin ends, then end whatever commands left running.

    With DECODE_AGENTD_SOCKET (docker), requests and answers go over a connection to that unix socket
    instead, until it ends; the variable is not passed on to commands.

    SIGPIPE stays ignored, as Python starts it: a write to a reader that is gone (an MCP server that ended, a
    git that stopped reading, the harness) is an error, never agentd's end. Commands and servers get its
    default action back (posix_spawn's `setsigdef`, subprocess's `restore_signals`).
    """
    if len(sys.argv) != 2:
        sys.stderr.write("usage: agentd.pyz WORKSPACE\n")
        return 2
    become_subreaper()
    become_undumpable()
    start_egress()
    channel = os.environ.pop(CHANNEL_SOCKET, "")
    try:
        if channel:
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.connect(channel)
            serve(sys.argv[1], conn.makefile("rb"), conn.makefile("wb"))
        else:
            serve(sys.argv[1], sys.stdin.buffer, sys.stdout.buffer)
    finally:
        stop_all()
        kill_descendants()
    return 0
