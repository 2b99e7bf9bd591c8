"""The wire side of the egress proxy: HTTP proxy request heads and answers (the byte relay is agentd's
`relay`, bot/sandbox/agentd/relay.py, one loop for both ends).

No policy here (egress_policy.py decides, egress.py runs the proxy).
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

HOP_BY_HOP = {"proxy-connection", "proxy-authorization", "connection", "keep-alive"}
TLS_HANDSHAKE, CLIENT_HELLO, SERVER_NAME, HOST_NAME = 0x16, 0x01, 0, 0
ACCESS_DENIED = b"\x15\x03\x03\x00\x02\x02\x31"  # a fatal TLS alert, access_denied (RFC 8446 section 6)


class Reply(Exception):
    """An HTTP answer that ends the connection (`status` like "403 Forbidden", a one-line `body`)."""

    def __init__(self, status: str, body: str) -> None:
        super().__init__(body)
        self.status, self.body = status, body


@dataclass(frozen=True)
class Request:
    """A proxy request: `forward` is the head to send upstream (empty for CONNECT), `host_headers` the Host
    header values the client wrote (plain HTTP), for the policy to compare with `host`."""

    method: str
    host: str
    port: int
    forward: bytes = b""
    host_headers: tuple[str, ...] = ()
    length: int = 0  # the body's Content-Length (plain HTTP)
    chunked: bool = False  # the body is chunked (Transfer-Encoding: chunked)


def parse_request(head: bytes) -> Request:
    """The CONNECT or absolute-form HTTP request in `head`; a 400 Reply when it is neither."""
    lines = head.decode("latin-1").split("\r\n")
    _refuse_ambiguous(lines)
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        raise Reply("400 Bad Request", f"not an HTTP request line: {lines[0][:200]!r}")
    method, target, version = parts
    try:
        url = urlsplit(("//" + target) if method == "CONNECT" else target)
        host, port = url.hostname, url.port or (None if method == "CONNECT" else 80)
    except ValueError:
        raise Reply("400 Bad Request", f"no host and port in {target[:200]!r}") from None
    if method != "CONNECT" and url.scheme != "http":
        raise Reply("400 Bad Request", f"the egress proxy takes CONNECT host:port or http:// URLs: {target[:200]!r}")
    if not host or not port:
        raise Reply("400 Bad Request", f"no host and port in {target[:200]!r}")
    if method == "CONNECT":
        return Request(method, host, port)
    path = url.path or "/"
    if url.query:
        path += "?" + url.query
    headers = [h for h in lines[1:] if h and h.split(":", 1)[0].strip().lower() not in HOP_BY_HOP]
    named = tuple(h.partition(":")[2] for h in headers if h.split(":", 1)[0].strip().lower() == "host")
    if not named:
        headers.insert(0, f"Host: {url.netloc.rpartition('@')[2]}")
    forward = "\r\n".join([f"{method} {path} {version}", *headers, "Connection: close", "", ""])
    length, chunked = _framing(lines[1:])
    return Request(method, host, port, forward.encode("latin-1"), named, length, chunked)


def _refuse_ambiguous(lines: list[str]) -> None:
    """A 400 Reply for a head an upstream server might read otherwise than this proxy: a bare CR or LF, NUL,
    a folded header line (obs-fold, RFC 9112 section 5.2: a server may join it to the line above, a Host
    header the proxy never checked), a line without a name, or space before the colon."""
    for line in lines[1:]:
        if any(c in line for c in "\r\n\0"):
            raise Reply("400 Bad Request", "a bare CR, LF or NUL in the request head: end each line with CRLF")
        if line[:1] in (" ", "\t"):
            raise Reply("400 Bad Request", "a folded header line (obs-fold): write each header on one line")
        name = line.split(":", 1)[0]
        if ":" not in line or not name or name != name.strip():
            raise Reply("400 Bad Request", f"not a header line: {line[:200]!r}")


def _framing(headers: list[str]) -> tuple[int, bool]:
    """(Content-Length, chunked) of a plain-HTTP request; a 400 Reply when its length is ambiguous (both
    headers, a transfer coding other than `chunked` alone, differing or malformed lengths), which is how one
    request smuggles another past a proxy (RFC 9112 section 6.3)."""
    values = {"content-length": [], "transfer-encoding": []}  # type: dict[str, list[str]]
    for line in headers:
        name, _, value = line.partition(":")
        if name.strip().lower() in values:
            values[name.strip().lower()] += [v.strip().lower() for v in value.split(",")]
    lengths, codings = set(values["content-length"]), values["transfer-encoding"]
    if lengths and codings:
        raise Reply("400 Bad Request", "both Content-Length and Transfer-Encoding: send one")
    if codings and codings != ["chunked"]:
        raise Reply("400 Bad Request", f"Transfer-Encoding {', '.join(codings)[:100]!r}: only chunked is taken")
    if len(lengths) > 1 or any(not v.isdigit() for v in lengths):
        raise Reply("400 Bad Request", "a missing, malformed or repeated Content-Length: send one")
    return (int(next(iter(lengths))) if lengths else 0), bool(codings)


class Body:
    """A message body framed by a Content-Length (`length`) or chunked: `take` keeps the part of the next bytes
    that belongs to it, and `done` says it is complete. A malformed chunk raises OSError (the connection
    ends)."""

    LINE_MAX = 4096

    def __init__(self, length: int, chunked: bool) -> None:
        self.left, self.chunked = length, chunked
        self.state = "size" if chunked else "data"
        self.line = b""
        self.done = not chunked and length == 0

    def take(self, data: bytes) -> bytes:
        """The part of `data` (the next bytes) that belongs to the body."""
        out, at = bytearray(), 0
        while at < len(data) and not self.done:
            if self.state == "data":
                piece = data[at:at + self.left]
                out += piece
                at += len(piece)
                self.left -= len(piece)
                if self.left == 0:
                    self.state, self.done = "crlf", not self.chunked
                continue
            end = data.find(b"\n", at)
            piece = data[at:] if end < 0 else data[at:end + 1]
            out += piece
            at += len(piece)
            self.line += piece
            if len(self.line) > self.LINE_MAX:
                raise OSError("a chunk line passed 4096 bytes")
            if end >= 0:
                self._line(self.line)
                self.line = b""
        return bytes(out)

    def _line(self, line: bytes) -> None:
        """One whole line of a chunked body: a chunk's size, the CRLF after its data, or a trailer."""
        if not line.endswith(b"\r\n") or b"\r" in line[:-2]:
            raise OSError("a chunked body's line does not end with CRLF")
        if self.state == "crlf":
            if line != b"\r\n":
                raise OSError("a chunk's data is longer than its size")
            self.state = "size"
        elif self.state == "size":
            size = line[:-2].split(b";", 1)[0]
            if not size or size.strip(b"0123456789abcdefABCDEF") or len(size) > 16:
                raise OSError(f"not a chunk size: {size[:20]!r}")
            self.left = int(size, 16)
            self.state = "data" if self.left else "trailer"
        elif line == b"\r\n":  # the empty line that ends the trailers: the request is complete
            self.done = True


def read_client_hello(sock: socket.socket, data: bytes, limit: int) -> tuple[bytes, str | None]:
    """Read a TLS ClientHello from `sock` (after `data`, already read) without answering it: the bytes read,
    to forward unchanged, and the server name (SNI) the hello carries; None when the stream is not TLS, names
    no server, or passes `limit` bytes or the socket's timeout first. TLS is peeked at, never terminated."""
    while True:
        message = handshake_bytes(data)
        if message is None:
            return data, None
        if len(message) >= 4 and len(message) >= 4 + int.from_bytes(message[1:4], "big"):
            if message[0] != CLIENT_HELLO:
                return data, None
            return data, server_name(message[4:4 + int.from_bytes(message[1:4], "big")])
        if len(data) >= limit:
            return data, None
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            return data, None
        if not chunk:
            return data, None
        data += chunk


def handshake_bytes(data: bytes) -> bytes | None:
    """The handshake bytes of the complete TLS records at the start of `data` (a message may span records);
    None when `data` does not start as TLS handshake records do."""
    found, at = b"", 0
    while len(data) - at >= 1:
        if data[at] != TLS_HANDSHAKE:
            return None
        if len(data) - at < 5 or len(data) - at < 5 + int.from_bytes(data[at + 3:at + 5], "big"):
            break
        size = int.from_bytes(data[at + 3:at + 5], "big")
        found, at = found + data[at + 5:at + 5 + size], at + 5 + size
    return found


def server_name(hello: bytes) -> str | None:
    """The host name in a ClientHello body's server_name extension (RFC 6066 section 3), else None."""
    try:
        at = 2 + 32  # client_version, random
        at += 1 + hello[at]  # session_id
        at += 2 + int.from_bytes(hello[at:at + 2], "big")  # cipher_suites
        at += 1 + hello[at]  # compression_methods
        end = at + 2 + int.from_bytes(hello[at:at + 2], "big")
        at += 2
        while at + 4 <= min(end, len(hello)):
            kind, size = int.from_bytes(hello[at:at + 2], "big"), int.from_bytes(hello[at + 2:at + 4], "big")
            at += 4
            if kind == SERVER_NAME:
                names, offset = hello[at + 2:at + size], 0
                while offset + 3 <= len(names):
                    length = int.from_bytes(names[offset + 1:offset + 3], "big")
                    if names[offset] == HOST_NAME:
                        return names[offset + 3:offset + 3 + length].decode("ascii")
                    offset += 3 + length
                return None
            at += size
    except (IndexError, UnicodeDecodeError):
        return None
    return None


class OneExchange:
    """One plain-HTTP request and its response. The client's first request (its body framed as its head says)
    goes upstream and nothing after it; the server's first final response comes back, and then the exchange
    is `finished` and the connection ends. So a pipelined or later request (which could name another Host)
    never reaches upstream and is never left waiting: the client sends it again on a new connection, where it
    is checked. A response without a length runs to its close; an upgrade (101) makes a tunnel both ways."""

    HEAD_MAX = 64 * 1024

    def __init__(self, request: Request) -> None:
        self.request = Body(request.length, request.chunked)
        self.bodiless = request.method == "HEAD"
        self.response: Body | None = None
        self.head = b""
        self.through = self.tunnel = self.finished = False

    def from_client(self, data: bytes) -> bytes:
        """What of the client's `data` goes upstream."""
        return data if self.tunnel else self.request.take(data)

    def from_server(self, data: bytes) -> bytes:
        """What of the server's `data` goes back to the client (`finished` once the response is complete)."""
        if self.through:
            return data
        out = bytearray()
        while data and not self.finished:
            if self.response is not None:
                taken = self.response.take(data)
                out += taken
                data, self.finished = data[len(taken):], self.response.done
                continue
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                if len(self.head) > self.HEAD_MAX:
                    out, self.through = out + self.head, True
                return bytes(out)
            head, data, self.head = self.head[:end + 4], self.head[end + 4:], b""
            out += head
            self._start(head.decode("latin-1").split("\r\n")[:-2])
            if self.through:
                return bytes(out + data)
        return bytes(out)

    def _start(self, lines: list[str]) -> None:
        """Frame the response whose head is `lines`: an interim one (1xx) waits for the final one."""
        parts = lines[0].split(" ")
        status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
        if status == 101 or not 100 <= status < 600:  # an upgrade: a tunnel both ways; not HTTP: as it comes
            self.through, self.tunnel = True, status == 101
            return
        if status < 200:
            return
        if self.bodiless or status in (204, 304):
            self.finished = True
            return
        try:
            length, chunked = _framing(lines[1:])
        except Reply:  # framed two ways: to its close, as any client would read it
            length, chunked = -1, False
        if length < 0 or not (chunked or any(h.split(":", 1)[0].strip().lower() == "content-length"
                                              for h in lines[1:])):
            self.through = True  # no length: the body runs to the close
            return
        self.response = Body(length, chunked)
        self.finished = self.response.done


def cut(sockets: list[socket.socket]) -> None:
    for sock in sockets:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def answer(client: socket.socket, status: str, body: str) -> None:
    """Send a one-line answer, then read what the client still sends for up to 2 s: closing on
    unread data would reset the connection before the client has read the answer."""
    data = (body + "\n").encode()
    head = (f"HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {len(data)}\r\n"
            f"Connection: close\r\n\r\n").encode()
    deadline = time.monotonic() + 2.0
    try:
        client.sendall(head + data)
        client.shutdown(socket.SHUT_WR)
        while (left := deadline - time.monotonic()) > 0:
            client.settimeout(left)
            if not client.recv(65536):
                break
    except OSError:
        pass


def bind_unix(sock: socket.socket, path: Path) -> None:
    """Bind to `path`, through /proc/self/fd when it is longer than a unix socket address may be."""
    if len(str(path).encode()) < 100:
        sock.bind(str(path))
        return
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        sock.bind(f"/proc/self/fd/{directory}/{path.name}")
    finally:
        os.close(directory)
