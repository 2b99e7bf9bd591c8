"""agentd's MCP relay (bot/sandbox/agentd/mcp.py) on every backend: a server's lines come back through
`Sandbox.mcp_io`; it outlives each command while what a command leaves behind is still ended; its end is told
with its status and stderr; a line too long to carry is reported by its size."""

from __future__ import annotations

import json
import time
from pathlib import Path

STUB = Path(__file__).parents[2] / "support" / "mcp_stub.py"

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}
CALL = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "shell", "arguments": {"command": "x"}}}


def test_a_server_answers_outlives_commands_and_their_leftovers_still_end(sandbox, workspace: Path):
    (workspace / "stub.py").write_text(STUB.read_text())
    sandbox.mcp_start("stub", "python3 stub.py echo", {"GREETING": "hi"})
    first = sandbox.mcp_io("stub", json.dumps(INIT), [1], 30)
    assert json.loads(first.lines[-1])["result"]["serverInfo"]["name"] == "stub" and not first.exited
    sandbox.run("sleep 271 & disown; echo left")
    assert "none" in sandbox.run("pgrep -f 'sleep 27[1]' || echo none").output  # a command's leftover ended
    answer = sandbox.mcp_io("stub", json.dumps(CALL), [2], 30)
    assert json.loads(answer.lines[-1])["result"]["content"][0]["text"] == "x"  # the server did not
    sandbox.mcp_stop("stub")


def test_a_server_that_ends_is_told_with_its_status_and_stderr(sandbox):
    sandbox.mcp_start("gone", "echo 'cannot start: no config' >&2; exit 3", {})
    ended = sandbox.mcp_io("gone", json.dumps(INIT), [1], 30)
    assert ended.exited and ended.status == 3 and "cannot start: no config" in ended.stderr and not ended.lines


def test_a_server_that_closed_its_stdin_ends_as_told_and_agentd_lives_on(sandbox):
    """A write to a server that no longer reads (here: its stdin closed at once; in CI, one that ended between the
    check and the write) was a SIGPIPE that killed agentd, and the run with it."""
    sandbox.mcp_start("deaf", "exec 0<&-; sleep 1; echo 'no input' >&2; exit 3", {})
    time.sleep(0.5)  # its stdin is closed by now; it is still running
    ended = sandbox.mcp_io("deaf", json.dumps(INIT), [1], 30)
    assert ended.exited and ended.status == 3 and "no input" in ended.stderr
    assert sandbox.run("echo alive").output.strip() == "alive"
    ignored = int(sandbox.run("grep SigIgn /proc/self/status").output.split()[-1], 16)
    assert not ignored & 1 << 12  # a command still gets SIGPIPE's default action (signal 13)


def test_a_line_too_long_to_carry_is_reported_by_its_size(sandbox):
    sandbox.mcp_start("big", "python3 -c \"import sys; sys.stdin.readline(); print('x' * (17 << 20), flush=True); "
                             "print('{}', flush=True); sys.stdin.readline()\"", {})
    got = sandbox.mcp_io("big", json.dumps(INIT), [1], 60)
    assert got.oversize and got.oversize[0] >= 17 << 20 and not got.exited
    sandbox.mcp_stop("big")
