"""The doubles' HTTP server: a connection gone before its accept never stops the serving thread."""

from __future__ import annotations

import threading
import urllib.request
from http.server import BaseHTTPRequestHandler

import pytest

from tests.fakes.http import start_server, stop_server


class _Ok(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


def test_an_accept_with_no_connection_left_returns_and_serving_goes_on(capsys: pytest.CaptureFixture[str]) -> None:
    server = start_server(_Ok)
    try:
        accepting = threading.Thread(target=server._handle_request_noblock)  # as after a poll whose connection left
        accepting.start()
        accepting.join(2)
        assert not accepting.is_alive()  # a blocking accept would wait here for the next client, and shutdown too
        assert "gone before accept" in capsys.readouterr().err
        with urllib.request.urlopen(f"http://127.0.0.1:{server.server_address[1]}/", timeout=5) as answer:
            assert answer.read() == b"ok"
    finally:
        stop_server(server)
