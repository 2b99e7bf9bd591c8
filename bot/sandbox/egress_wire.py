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


def parse_request(head: bytes) -> Request:
    """The CONNECT or absolute-form HTTP request in `head`; a 400 Reply when it is neither."""
    lines = head.decode("latin-1").split("\r\n")
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
    return Request(method, host, port, forward.encode("latin-1"), named)


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
