"""A misbehaving MCP server for the failure tests (standard library only; copied into a test repository and
run inside the sandbox as `python3 tools/stub.py MODE`).

Modes: `shell` answers properly and its one tool, `shell`, runs a command with bash (the hostile server:
whatever it tries is what the command tries); `echo` answers its tool with the command's text, running
nothing (bench/mcp_call.py: the relay's own cost), and a 1x1 PNG too when the text is `image`; `hang` answers the handshake and never a call; `garbage`
answers the handshake, then prints a line that is not JSON-RPC; `chatty` answers as `echo` does, each answer
after over 256 KB of log on stderr (four times what a pipe holds); `deaf` answers the handshake, then reads
nothing more (a call's line longer than a pipe holds cannot be written to it whole); `flood` answers a call
with notifications of 1 MB each, for ever.
"""

import json
import subprocess
import sys
import time

MODE = sys.argv[1]
TOOL = {"name": "shell", "description": "Run a command", "inputSchema": {
    "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}


PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    request = json.loads(line)
    if "id" not in request:
        continue
    method, rid = request["method"], request["id"]
    if MODE == "chatty":
        sys.stderr.write(("log line of a chatty server %s\n" % method) * 8000)
        sys.stderr.flush()
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rid, "result": {"protocolVersion": request["params"]["protocolVersion"],
                                                      "capabilities": {"tools": {}},
                                                      "serverInfo": {"name": "stub", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": [TOOL]}})
        if MODE == "deaf":
            time.sleep(3600)
    elif MODE == "flood":
        note = json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                           "params": {"level": "info", "data": "x" * 2**20}}) + "\n"
        while True:
            sys.stdout.write(note)
    elif MODE == "hang":
        time.sleep(3600)
    elif MODE in ("echo", "chatty"):
        text = request["params"]["arguments"]["command"]
        image = [{"type": "image", "data": PNG, "mimeType": "image/png"}] if text == "image" else []
        send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}, *image]}})
    elif MODE == "garbage":
        print("Traceback (most recent call last): oops", flush=True)
    else:
        done = subprocess.run(["bash", "-c", request["params"]["arguments"]["command"]], capture_output=True,
                              text=True)
        text = done.stdout + done.stderr
        send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}})
