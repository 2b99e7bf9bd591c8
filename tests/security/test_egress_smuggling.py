"""The egress proxy's plain-HTTP path and `allow_cidrs`' IPv6 forms against hostile clients (issue 32), over
real sockets: the real `EgressProxy` on its unix socket, a fake resolver and network that land every
connection on a lax origin on loopback (one that keeps connections open and answers every request it reads,
as a shared front end would), and the raw bytes that origin received.

Only the checked request ever reaches upstream: a pipelined or later second request on the connection, a
body framed two ways (Content-Length with Transfer-Encoding: chunked), a folded header line or a bare LF
that a server could read as another Host header are refused or dropped. An IPv6 address passes
`allow_cidrs` only when it and every IPv4 address it carries lie inside the ranges."""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.sandbox import EgressPolicy
from bot.sandbox.egress import EgressProxy
from tests.fakes.internet import FakeUpstream
from tests.support.egress import connect

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n"
POLICY = EgressPolicy(allow_domains=("allowed.example",))


class LaxOrigin:
    """A TCP server on loopback that keeps each connection open, answers 200 to every request head it reads
    (whatever Connection says) and records every byte received, per connection."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.received: list[bytearray] = []
        self.answer = OK  # what it sends for each request head
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            got = bytearray()
            self.received.append(got)
            threading.Thread(target=self._serve, args=(conn, got), daemon=True).start()

    def _serve(self, conn: socket.socket, got: bytearray) -> None:
        conn.settimeout(5)
        with conn:
            try:
                while chunk := conn.recv(65536):
                    got += chunk
                    conn.sendall(self.answer * chunk.count(b"\r\n\r\n"))
            except OSError:
                pass

    @property
    def everything(self) -> bytes:
        return b"".join(self.received)


@pytest.fixture
def origin() -> Iterator[LaxOrigin]:
    lax = LaxOrigin()
    yield lax
    lax.server.close()


@pytest.fixture
def upstream(origin: LaxOrigin) -> FakeUpstream:
    return FakeUpstream(origin.port, {"allowed.example": ["198.51.100.10"], "other.example": ["198.51.100.20"]})


@pytest.fixture
def proxy(tmp_path: Path, upstream: FakeUpstream) -> Iterator[EgressProxy]:
    egress = EgressProxy(tmp_path / "proxy.sock", POLICY, upstream=upstream)
    yield egress
    egress.close()


def exchange(proxy: EgressProxy, *sends: bytes) -> bytes:
    """Send each of `sends` on one connection (the next after the first answer has come), then read to the end."""
    sock = connect(proxy)
    sock.sendall(sends[0])
    data = sock.recv(65536)
    for more in sends[1:]:
        try:
            sock.sendall(more)
        except OSError:
            break
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except OSError:
        pass
    sock.close()
    return data


GET = b"GET http://allowed.example/one HTTP/1.1\r\nHost: allowed.example\r\n\r\n"
SECOND = b"GET /two HTTP/1.1\r\nHost: other.example\r\n\r\n"


def test_a_pipelined_second_request_to_another_host_never_reaches_upstream(proxy, origin) -> None:
    assert exchange(proxy, GET + SECOND).startswith(OK)
    assert exchange(proxy, GET, SECOND).startswith(OK)  # sent after the first answer, on the same connection
    absolute = b"GET http://other.example/two HTTP/1.1\r\nHost: other.example\r\n\r\n"
    assert exchange(proxy, GET + absolute).startswith(OK)
    assert b"other.example" not in origin.everything and origin.everything.count(b"GET /one HTTP/1.1") == 3


@pytest.mark.parametrize("head, rule", [
    (b"Host: allowed.example\r\nX-Note: a\r\n Host: other.example\r\n", b"folded header line"),
    (b"Host: allowed.example\r\nX-Note: a\tHost: other.example\r\n", None),  # a tab inside a value is fine
    (b"Host: allowed.example\r\nX-Note: a\nHost: other.example\r\n", b"bare CR, LF"),
    (b"Host: allowed.example\r\nX-Note: a\rHost: other.example\r\n", b"bare CR, LF"),
    (b"Host: allowed.example\r\nHost : other.example\r\n", b"not a header line"),
])
def test_header_lines_a_server_could_read_as_another_host_are_refused(proxy, origin, head, rule) -> None:
    reply = exchange(proxy, b"GET http://allowed.example/ HTTP/1.1\r\n" + head + b"\r\n")
    if rule is None:
        assert reply.startswith(OK)
        return
    assert reply.startswith(b"HTTP/1.1 400 Bad Request") and rule in reply, reply
    assert origin.received == []


SMUGGLED = b"GET /admin HTTP/1.1\r\nHost: other.example\r\n\r\n"


@pytest.mark.parametrize("framing", [
    b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
    b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
    b"Transfer-Encoding: chunked, identity\r\n",
    b"Transfer-Encoding: xchunked\r\n",
    b"Content-Length: 5\r\nContent-Length: 50\r\n",
    b"Content-Length: +5\r\n",
])
def test_a_body_framed_two_ways_is_refused(proxy, origin, framing) -> None:
    body = b"5\r\nhello\r\n0\r\n\r\n" + SMUGGLED
    reply = exchange(proxy, b"POST http://allowed.example/form HTTP/1.1\r\nHost: allowed.example\r\n" + framing
                     + b"\r\n" + body)
    assert reply.startswith(b"HTTP/1.1 400 Bad Request"), reply
    assert origin.received == []


@pytest.mark.parametrize("framing, body", [
    (b"Content-Length: 5\r\n", b"hello"),
    (b"Transfer-Encoding: chunked\r\n", b"5\r\nhello\r\n0\r\n\r\n"),
    (b"Transfer-Encoding: Chunked\r\n", b"2;x=1\r\nhe\r\n3\r\nllo\r\n0\r\nX-Trailer: t\r\n\r\n"),
])
def test_a_body_goes_upstream_whole_and_nothing_after_it(proxy, origin, framing, body) -> None:
    reply = exchange(proxy, b"POST http://allowed.example/form HTTP/1.1\r\nHost: allowed.example\r\n" + framing
                     + b"\r\n" + body + SMUGGLED)
    assert reply.startswith(OK)
    [got] = origin.received
    assert bytes(got).endswith(b"\r\n\r\n" + body) and b"/admin" not in got


# Teredo: server 198.51.100.1 (c633:6401), client 10.0.0.1 (obfuscated: f5ff:fffe)
TEREDO = "2001:0:c633:6401::f5ff:fffe"


@pytest.mark.parametrize("address, cidrs, passes", [
    ("::ffff:10.0.0.1", ("10.0.0.0/8",), True),  # mapped: the IPv4 address itself
    ("2002:a00:1::1", ("10.0.0.0/8",), False),  # 6to4 reaches a relay, not only 10.0.0.1
    ("2002:a00:1::1", ("2002::/16",), False),  # ...and the 10.0.0.1 it carries
    ("2002:a00:1::1", ("2002::/16", "10.0.0.0/8"), True),
    (TEREDO, ("10.0.0.0/8",), False),
    (TEREDO, ("2001::/32", "10.0.0.0/8"), False),  # the Teredo server 198.51.100.1 is not listed
    (TEREDO, ("2001::/32", "10.0.0.0/8", "198.51.100.0/24"), True),
    ("64:ff9b::a00:1", ("10.0.0.0/8",), False),  # NAT64
    ("64:ff9b::a00:1", ("64:ff9b::/96", "10.0.0.0/8"), True),
    ("64:ff9b:1::a00:1", ("10.0.0.0/8",), False),  # local-use NAT64
    ("64:ff9b:1::a00:1", ("64:ff9b:1::/48",), False),
    ("64:ff9b:1::a00:1", ("64:ff9b:1::/48", "10.0.0.0/8"), True),
    ("::a00:1", ("10.0.0.0/8",), False),  # IPv4-compatible
    ("::a00:1", ("::/96",), False),
    ("::a00:1", ("::/96", "10.0.0.0/8"), True),
])
def test_an_ipv6_address_passes_allow_cidrs_only_with_every_ipv4_it_carries(
    proxy, upstream, address, cidrs, passes
) -> None:
    proxy.policy = EgressPolicy(allow_cidrs=cidrs)
    reply = exchange(proxy, f"CONNECT [{address}]:443 HTTP/1.1\r\n\r\n".encode())
    if passes:
        assert reply.startswith(b"HTTP/1.1 200 Connection established"), reply
        assert upstream.connected == [(str(ipaddress.ip_address(address)), 443)]
    else:
        assert reply.startswith(b"HTTP/1.1 403 Forbidden") and b"allow_cidrs" in reply, reply
        assert upstream.connected == []


def test_the_connection_ends_after_the_first_response_so_a_second_request_never_waits(proxy, origin) -> None:
    start = time.monotonic()
    reply = exchange(proxy, GET + SECOND)  # the lax origin would hold the connection for 5 s
    assert reply == OK and time.monotonic() - start < 3
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"
    origin.answer = chunked + OK  # a response, then bytes a server smuggles after it
    assert exchange(proxy, GET) == chunked
    origin.answer = b"HTTP/1.1 100 Continue\r\n\r\n" + OK
    assert exchange(proxy, GET) == origin.answer
