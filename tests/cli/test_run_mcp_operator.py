"""The operator's MCP servers (DECODE_MCP_SERVERS): remote, streamable HTTP, called by the harness on the host
with the operator's credential; a repository chooses one by name and never sees the credential. The server is
the official SDK's, started here (tests/support/mcp_http_server.py)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.cli.test_run_mcp import results, run, use
from tests.support.mcp_servers import TIME

TOKEN = "op-mcp-credential-0123456789"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(params=["sse", "json"])
def remote(request) -> Iterator[str]:
    """The server's URL, answering as an SSE stream or as JSON."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tests.support.mcp_http_server", str(port), TOKEN,
                             *(["--json"] if request.param == "json" else [])], cwd=Path(__file__).parents[2])
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


def servers(url: str, token: str = TOKEN) -> str:
    return json.dumps({"docs": {"url": url, "headers": {"Authorization": f"Bearer {token}"}}})


def test_a_repository_chooses_the_operators_server_and_never_sees_its_credential(fake_anthropic, tmp_path, remote):
    turns = [[use("mcp__docs__lookup", term="egress")], [use("bash", command="env; cat .github/decode.yml")],
             [{"type": "text", "text": "Done."}]]
    res, events = run(fake_anthropic, tmp_path, "  docs: {operator: true}\n", turns, DECODE_MCP_SERVERS=servers(remote))
    assert res.returncode == 0, res.stderr
    assert "mcp__docs__lookup" in [t["name"] for t in fake_anthropic.requests[0].body["tools"]]
    looked_up, shell = results(fake_anthropic)
    assert not looked_up["is_error"] and "docs: egress is explained in chapter 7" in looked_up["content"]
    assert "DECODE_SANDBOX=" in shell["content"]
    seen = json.dumps([r.body for r in fake_anthropic.requests])
    assert TOKEN not in seen and "[REDACTED" not in seen  # the sandbox's environment never had it
    for path in (tmp_path / "data").rglob("*"):
        if path.is_file() and ".git" not in path.parts:
            assert TOKEN.encode() not in path.read_bytes(), path
    assert TOKEN not in res.stdout + res.stderr


def test_a_credential_the_server_says_back_never_reaches_the_model(fake_anthropic, tmp_path, remote):
    """The header's value is `Bearer TOKEN`; a server saying back TOKEN alone is redacted all the same."""
    turns = [[use("mcp__docs__whoami")], [{"type": "text", "text": "Done."}]]
    res, _ = run(fake_anthropic, tmp_path, "  docs: {operator: true}\n", turns, DECODE_MCP_SERVERS=servers(remote))
    assert res.returncode == 0, res.stderr
    [said] = results(fake_anthropic)
    assert "signed in with the bearer token [REDACTED" in said["content"] and TOKEN not in said["content"], said
    for path in (tmp_path / "data").rglob("*"):
        if path.is_file() and ".git" not in path.parts:
            assert TOKEN.encode() not in path.read_bytes(), path


def test_an_answer_over_16_mb_is_refused_and_the_server_goes_on(fake_anthropic, tmp_path, remote):
    turns = [[use("mcp__docs__dump", megabytes=20)], [use("mcp__docs__lookup", term="egress")],
             [{"type": "text", "text": "Done."}]]
    res, events = run(fake_anthropic, tmp_path, "  docs: {operator: true}\n", turns, DECODE_MCP_SERVERS=servers(remote))
    assert res.returncode == 0, res.stderr
    dumped, looked_up = results(fake_anthropic)
    assert dumped["is_error"] and "the server's answer passed 16 MB, more than one answer may be" in dumped["content"]
    assert not looked_up["is_error"] and "chapter 7" in looked_up["content"]


def test_a_wrong_credential_or_an_unknown_name_is_said_once_and_required_fails(fake_anthropic, tmp_path, remote):
    res, events = run(fake_anthropic, tmp_path, "  docs: {operator: true}\n  wiki: {operator: true}\n",
                      [[{"type": "text", "text": "Done."}]], DECODE_MCP_SERVERS=servers(remote, "wrong"))
    assert res.returncode == 0, res.stderr
    downs = {e["name"]: e["reason"] for e in events if e["type"] == "mcp_server" and e["state"] == "down"}
    assert downs == {"docs": "did not start: it answered HTTP 401",
                     "wiki": "did not start: the operator offers no MCP server wiki (DECODE_MCP_SERVERS offers: docs)"}
    failed, _ = run(fake_anthropic, tmp_path / "again", "  wiki: {operator: true, required: true}\n", [],
                    DECODE_MCP_SERVERS=servers(remote))
    assert failed.returncode == 1 and "MCP server wiki (required: true" in failed.stderr


@pytest.fixture
def silent_url() -> Iterator[str]:
    """A server that takes requests and never answers: its port's backlog holds the connections, none accepted."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        yield f"http://127.0.0.1:{silent.getsockname()[1]}"


def test_operator_servers_that_hang_are_given_up_together_and_the_run_goes_on(fake_anthropic, tmp_path, silent_url):
    """However many remote servers hang, they cost the start time once: they are asked together."""
    hung = json.dumps({"slow": {"url": f"{silent_url}/a"}, "slower": {"url": f"{silent_url}/b"}})
    res, events = run(fake_anthropic, tmp_path, "  slow: {operator: true}\n  slower: {operator: true}\n" + TIME,
                      [[use("mcp__time__get_current_time", timezone="UTC")], [{"type": "text", "text": "Done."}]],
                      DECODE_MCP_SERVERS=hung, DECODE_MCP_START_SECONDS="8")
    assert res.returncode == 0, res.stderr
    downs = {e["name"]: e for e in events if e["type"] == "mcp_server" and e["state"] == "down"}
    assert {n: e["reason"] for n, e in downs.items()} == {n: "did not start: it did not answer initialize within 8s"
                                                          for n in ("slow", "slower")}
    assert downs["slower"]["t"] - downs["slow"]["t"] < 4, f"{downs}: they hung one after the other, not together"
    assert '"timezone": "UTC"' in results(fake_anthropic)[0]["content"]  # the sandbox's server came up meanwhile


def test_a_required_server_that_fails_ends_the_run_without_waiting_for_one_that_hangs(fake_anthropic, tmp_path,
                                                                                      silent_url):
    started = time.monotonic()
    res, _ = run(fake_anthropic, tmp_path, "  wiki: {operator: true, required: true}\n  slow: {operator: true}\n", [],
                 DECODE_MCP_SERVERS=json.dumps({"slow": {"url": silent_url}}), DECODE_MCP_START_SECONDS="30")
    assert res.returncode == 1 and "MCP server wiki (required: true" in res.stderr
    assert time.monotonic() - started < 15, "the run waited for the hung server's start time before it exited"


class Unanswering(BaseHTTPRequestHandler):
    """Servers that answer without answering: /ping streams SSE keep-alives for ever, /other answers with a
    notification instead of the result, /late answers `initialize` after 3 s and then takes nothing more."""

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/late":
            time.sleep(3 if message.get("method") == "initialize" else 30)
            self.result(message["id"], {"protocolVersion": message["params"]["protocolVersion"],
                                        "capabilities": {"tools": {}}, "serverInfo": {"name": "late", "version": "1"}})
            return
        self.send_response(200)
        if self.path == "/ping":
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            try:
                while True:
                    self.wfile.write(b": ping\n\n")
                    self.wfile.flush()
                    time.sleep(0.2)
            except OSError:  # the client gave up
                return
        body = json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {}}).encode()
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def result(self, request_id: int, result: dict) -> None:
        body = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_a_server_that_streams_keep_alives_answers_something_else_or_stalls_is_given_up(fake_anthropic, tmp_path):
    """However it fails to answer, a remote server has DECODE_MCP_START_SECONDS for its whole handshake."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Unanswering)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    odd = {name: {"url": f"{url}/{name}"} for name in ("ping", "other", "late")}
    try:
        res, events = run(fake_anthropic, tmp_path, "".join(f"  {name}: {{operator: true}}\n" for name in odd),
                          [[{"type": "text", "text": "Done."}]], DECODE_MCP_START_SECONDS="4",
                          DECODE_MCP_SERVERS=json.dumps(odd))
    finally:
        httpd.shutdown()
    assert res.returncode == 0, res.stderr
    downs = {e["name"]: e for e in events if e["type"] == "mcp_server" and e["state"] == "down"}
    assert {n: e["reason"] for n, e in downs.items()} == {
        "ping": "did not start: it did not answer initialize within 4s",
        "other": "did not start: its response ended without the answer",
        "late": "did not start: it did not take notifications/initialized within 4s"}
    began = next(e["t"] for e in events if e["type"] == "run_start")
    assert downs["ping"]["t"] - began < 7, "the keep-alives kept the start waiting past its time"
    assert downs["late"]["t"] - downs["ping"]["t"] < 1.5, "the late server had its start time again after initialize"
