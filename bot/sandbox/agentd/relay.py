"""Egress from the sandbox: 127.0.0.1:PORT relayed to the harness's egress proxy.

bwrap and docker sandboxes have no network interface but loopback. When
`DECODE_EGRESS_SOCKET` names the harness's egress proxy (a unix socket bound
in from the host, see bot/sandbox/egress.py), agentd relays a loopback port to
it and sets the proxy variables every command inherits.
"""

from __future__ import annotations

import os
import select
import socket
import threading
import time
from typing import Callable, Protocol

EGRESS_SOCKET = "DECODE_EGRESS_SOCKET"
PROXY_VARS = ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY")
NO_PROXY = "localhost,127.0.0.1,::1"
NOSIGNAL = getattr(socket, "MSG_NOSIGNAL", 0)  # no SIGPIPE from a send, whatever its disposition
HALF_CLOSED_S = 30.0


def start_egress() -> int | None:
    """Relay 127.0.0.1:PORT to the egress proxy named by DECODE_EGRESS_SOCKET and point every command
    at it (http_proxy, https_proxy and their upper-case forms; no_proxy for loopback). Returns the
    port, or None when there is no proxy (the local and modal backends)."""
    path = os.environ.get(EGRESS_SOCKET)
    if not path:
        return None
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(128)
    port = server.getsockname()[1]
    spawn(accept_egress, server, path)
    for name in PROXY_VARS:
        os.environ[name] = "http://127.0.0.1:%d" % port
    os.environ["no_proxy"] = os.environ["NO_PROXY"] = NO_PROXY
    return port


def spawn(target: Callable[..., None], *args: object) -> None:
    thread = threading.Thread(target=target, args=args)
    thread.daemon = True
    thread.start()


def accept_egress(server: socket.socket, path: str) -> None:
    """Forward each connection to the loopback port, each on a thread of its own."""
    while True:
        try:
            client, _ = server.accept()
        except OSError:  # out of descriptors: let connections finish
            time.sleep(0.05)
            continue
        spawn(forward_egress, client, path)


def forward_egress(client: socket.socket, path: str) -> None:
    """Relay `client` to the proxy's unix socket at `path`; a 502 naming it when it cannot be reached."""
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        try:
            upstream.connect(path)
        except OSError as e:
            body = ("decode-bot's egress proxy is not reachable at %s: %s\n" % (path, e)).encode()
            head = b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
            client.sendall(head + body, NOSIGNAL)
            return
        relay(client, upstream)
    except OSError:
        pass
    finally:
        client.close()
        upstream.close()


class Exchange(Protocol):
    """What may pass a relay, and when it ends (the host's egress proxy: bot/sandbox/egress_wire.OneExchange)."""

    finished: bool

    def from_client(self, data: bytes) -> bytes: ...

    def from_server(self, data: bytes) -> bytes: ...


def relay(a: socket.socket, b: socket.socket, idle_s: float | None = None, only: Exchange | None = None) -> None:
    """Copy bytes both ways until both sides have finished sending, a socket fails, or `idle_s` pass in silence
    (None: no limit; `HALF_CLOSED_S` at most once one side has finished, so a keep-alive client does not hold
    its slot). With `only` (client `a`, server `b`), what passes each way is what it lets through, and the relay
    ends once it is `finished`. The one relay loop: agentd's egress port and the host's egress proxy."""
    peer = {a.fileno(): (a, b), b.fileno(): (b, a)}
    poller = select.poll()
    for fd in peer:
        poller.register(fd, select.POLLIN)
    open_ends = 2
    while open_ends:
        wait = idle_s if open_ends == 2 else min(idle_s or HALF_CLOSED_S, HALF_CLOSED_S)
        events = poller.poll(None if wait is None else wait * 1000)
        if not events:
            return
        for fd, _ in events:
            source, target = peer[fd]
            try:
                data = source.recv(65536)
                if data and only is not None:
                    data = only.from_client(data) if source is a else only.from_server(data)
                    if not data and not only.finished:
                        continue
                if data:
                    target.sendall(data, NOSIGNAL)
            except OSError:
                return
            if only is not None and only.finished:
                return
            if data:
                continue
            poller.unregister(fd)
            open_ends -= 1
            try:
                target.shutdown(socket.SHUT_WR)
            except OSError:
                pass
