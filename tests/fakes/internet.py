"""A fake internet for the egress tests: a network namespace behind a veth pair, plus host services.

    host side of the veth   198.51.100.1/24 (a "public" address of the host itself), 10.77.0.1/24
    inside the namespace    198.51.100.10/24 (the public internet), 10.77.0.10/24 (a private network),
                            one HTTP server on both, port 8080, whose /who answers "internet"
    on the host             127.0.0.1:<loopback_port> answers "host-loopback",
                            198.51.100.1:<own_port> answers "host-own"

198.51.100.0/24 is a documentation range (RFC 5737): no real host has it, and the
egress policy treats it as public. Needs root and iproute2.

`FakeUpstream` is the lighter double, for the proxy alone: the proxy's lookups
answer from a table and its connections all land on one server on this
machine's loopback, each recorded, so a test can name any address (a metadata
endpoint, a NAT64 form) and nothing is sent off the machine. The ranges are
machine-wide, so a lock file lets one test process at a time hold them; the
namespace and veth names are unique, and the finalizer removes them.
"""

from __future__ import annotations

import fcntl
import ipaddress
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from bot.sandbox.egress_policy import IPAddress
from bot.sandbox.egress_wire import Reply
from tests.fakes.http import start_server, stop_server

PUBLIC, PRIVATE = "198.51.100.10", "10.77.0.10"
HOST_PUBLIC, HOST_PRIVATE = "198.51.100.1", "10.77.0.1"
PORT = 8080
LOCK = Path(tempfile.gettempdir()) / "decode-fake-internet.lock"


@dataclass(frozen=True)
class Internet:
    namespace: str
    loopback_port: int  # "host-loopback" on the host's 127.0.0.1
    own_port: int  # "host-own" on HOST_PUBLIC, an address of the host itself
    public: str = PUBLIC
    private: str = PRIVATE
    port: int = PORT


@dataclass
class FakeUpstream:
    """The egress proxy's resolver and network, faked: `names` maps a name to the addresses it resolves to;
    every connection, to whatever address, reaches 127.0.0.1:`port` instead. `looked_up` and `connected`
    record what the proxy asked."""

    port: int
    names: dict[str, list[str]] = field(default_factory=dict)
    looked_up: list[str] = field(default_factory=list)
    connected: list[tuple[str, int]] = field(default_factory=list)

    def resolve(self, host: str, port: int) -> list[IPAddress]:
        self.looked_up.append(host)
        literal = host.strip("[]")
        if literal not in self.names:
            try:
                return [ipaddress.ip_address(literal)]
            except ValueError:
                raise Reply("502 Bad Gateway", f"could not resolve {host}: not in the fake table") from None
        return [ipaddress.ip_address(a) for a in self.names[literal]]

    def connect(self, addresses: list[IPAddress], port: int, timeout: float) -> socket.socket:
        self.connected.append((str(addresses[0]), port))
        return socket.create_connection(("127.0.0.1", self.port), timeout=timeout)


def unavailable() -> str | None:
    """Why the fake internet cannot be built here, or None."""
    if os.geteuid() != 0:
        return "building a network namespace needs root"
    if shutil.which("ip") is None:
        return "iproute2 (ip) is not installed"
    return None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)


def _serve(address: str, text: str) -> ThreadingHTTPServer:
    body = (text + "\n").encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    return start_server(Handler, address=address)


def _wait_for(address: str, port: int, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection((address, port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@pytest.fixture(scope="module")
def internet() -> Iterator[Internet]:
    """The fake internet, for one test module; skipped (failed under CI) where it cannot be built."""
    reason = unavailable()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"the egress tests must run in CI: {reason}")
        pytest.skip(reason)
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        token = secrets.token_hex(3)
        namespace, outside, inside = f"decode-net-{token}", f"dn{token}h", f"dn{token}n"
        served = Path(tempfile.mkdtemp(prefix="decode-internet-"))
        (served / "who").write_text("internet\n")
        server: subprocess.Popen[bytes] | None = None
        host_servers: list[ThreadingHTTPServer] = []
        try:
            _ip("netns", "add", namespace)
            _ip("link", "add", outside, "type", "veth", "peer", "name", inside)
            _ip("link", "set", inside, "netns", namespace)
            for address in (f"{HOST_PUBLIC}/24", f"{HOST_PRIVATE}/24"):
                _ip("addr", "add", address, "dev", outside)
            _ip("link", "set", outside, "up")
            for address in (f"{PUBLIC}/24", f"{PRIVATE}/24"):
                _ip("-n", namespace, "addr", "add", address, "dev", inside)
            _ip("-n", namespace, "link", "set", inside, "up")
            _ip("-n", namespace, "link", "set", "lo", "up")
            server = subprocess.Popen(
                ["ip", "netns", "exec", namespace, "python3", "-m", "http.server", str(PORT), "--bind", "0.0.0.0",
                 "--directory", str(served)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            host_servers = [_serve("127.0.0.1", "host-loopback"), _serve(HOST_PUBLIC, "host-own")]
            for address in (PUBLIC, PRIVATE):
                _wait_for(address, PORT)
            yield Internet(namespace, host_servers[0].server_address[1], host_servers[1].server_address[1])
        finally:
            for host_server in host_servers:
                stop_server(host_server)
            if server is not None:
                server.kill()
                server.wait()
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True)
            subprocess.run(["ip", "link", "del", outside], capture_output=True)
            shutil.rmtree(served, ignore_errors=True)
