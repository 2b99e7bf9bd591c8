"""Serving a test double over HTTP on 127.0.0.1, in a background thread."""

from __future__ import annotations

import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class NonBlockingServer(ThreadingHTTPServer):
    """A ThreadingHTTPServer whose listening socket never blocks its serving thread.

    `serve_forever` polls the socket and then accepts; a connection that is gone by then (seen in CI
    under load: its client got no answer) would leave a blocking `accept` waiting for the next one, and
    `shutdown()` with it, for ever. Here that accept fails at once, says so on stderr (shown with a failed
    test), and serving goes on.
    """

    daemon_threads = True
    request_queue_size = 128

    def server_activate(self) -> None:
        super().server_activate()
        self.socket.setblocking(False)

    def get_request(self) -> tuple[socket.socket, Any]:
        try:
            conn, address = self.socket.accept()
        except BlockingIOError:
            print(f"test server on port {self.server_address[1]}: a connection announced by poll was gone before "
                  "accept", file=sys.stderr)
            raise
        conn.setblocking(True)
        return conn, address


def start_server(handler: type[BaseHTTPRequestHandler], fake: Any = None, address: str = "127.0.0.1",
                 ) -> ThreadingHTTPServer:
    """Serve `handler` on a free port of `address` (loopback by default); handlers reach the double as
    `self.server.fake`."""
    server = NonBlockingServer((address, 0), handler)
    server.fake = fake  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    return server


def stop_server(server: ThreadingHTTPServer) -> None:
    """Stop serving and close the listening socket."""
    server.shutdown()
    server.server_close()


class Served:
    """A double served over HTTP by its `handler` class, which calls the double's `handle(...)`: `start()` on a
    free loopback port, `url`, `stop()`."""

    handler: type[BaseHTTPRequestHandler]
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        """Base URL, e.g. http://127.0.0.1:PORT."""
        assert self._server is not None, "the double is not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> Any:
        """Serve on a free port in a background thread; returns the double."""
        self._server = start_server(self.handler, self)
        return self

    def stop(self) -> None:
        """Stop serving and close the listening socket."""
        if self._server is not None:
            stop_server(self._server)
            self._server = None
