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
