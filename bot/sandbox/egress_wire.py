"""The wire side of the egress proxy: HTTP proxy request heads, answers, and byte relaying.

No policy here (egress_policy.py decides, egress.py runs the proxy).
"""

from __future__ import annotations

import os
import select
import socket
import time
from pathlib import Path
from urllib.parse import urlsplit

HALF_CLOSED_S = 30.0
HOP_BY_HOP = {"proxy-connection", "proxy-authorization", "connection", "keep-alive"}


class Reply(Exception):
    """An HTTP answer that ends the connection (`status` like "403 Forbidden", a one-line `body`)."""

    def __init__(self, status: str, body: str) -> None:
        super().__init__(body)
        self.status, self.body = status, body


def parse_request(head: bytes) -> tuple[str, str, int, bytes]:
    """(method, host, port, the head to send upstream) for a CONNECT or an absolute-form HTTP request."""
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
        return method, host, port, b""
    path = url.path or "/"
    if url.query:
        path += "?" + url.query
    headers = [h for h in lines[1:] if h and h.split(":", 1)[0].strip().lower() not in HOP_BY_HOP]
    if not any(h.split(":", 1)[0].strip().lower() == "host" for h in headers):
        headers.insert(0, f"Host: {url.netloc.rpartition('@')[2]}")
    forward = "\r\n".join([f"{method} {path} {version}", *headers, "Connection: close", "", ""])
    return method, host, port, forward.encode("latin-1")


def relay(a: socket.socket, b: socket.socket, idle_s: float) -> None:
    """Copy bytes both ways until both sides have finished sending, or `idle_s` pass in silence
    (`HALF_CLOSED_S` once one side has finished: a keep-alive client would otherwise hold its slot)."""
    peer = {a.fileno(): (a, b), b.fileno(): (b, a)}
    poller = select.poll()
    for fd in peer:
        poller.register(fd, select.POLLIN)
    open_ends = len(peer)
    while open_ends:
        events = poller.poll((idle_s if open_ends == 2 else min(idle_s, HALF_CLOSED_S)) * 1000)
        if not events:
            return
        for fd, _ in events:
            source, target = peer[fd]
            try:
                data = source.recv(65536)
            except OSError:
                return
            if data:
                try:
                    target.sendall(data)
                except OSError:
                    return
                continue
            poller.unregister(fd)
            open_ends -= 1
            try:
                target.shutdown(socket.SHUT_WR)
            except OSError:
                pass


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
