"""Serving a test double over HTTP on 127.0.0.1, in a background thread."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def start_server(handler: type[BaseHTTPRequestHandler], fake: Any = None) -> ThreadingHTTPServer:
    """Serve `handler` on a free loopback port; handlers reach the double as `self.server.fake`."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
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
