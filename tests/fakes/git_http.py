"""A git smart-HTTP server for tests: `git http-backend` behind Basic auth, like GitHub's.

Serves every bare repository under `root`; a request without the expected
`Authorization: Basic base64(user:password)` header gets a 401, so a clone
succeeds only when the client sends the token.
"""

from __future__ import annotations

import base64
import gzip
import os
import subprocess
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

from tests.fakes.http import start_server, stop_server


def pushed_refs(body: bytes) -> list[str]:
    """The refs a `git-receive-pack` request updates: its pkt-line commands before the flush.

    See https://git-scm.com/docs/pack-protocol#_reference_update_request_and_packfile_transfer
    """
    if body[:2] == b"\x1f\x8b":
        body = gzip.decompress(body)
    refs, pos = [], 0
    while pos + 4 <= len(body):
        size = int(body[pos:pos + 4], 16)
        if size == 0:
            break
        line = body[pos + 4:pos + size].split(b"\0")[0].strip()
        refs.append(line.split(b" ")[2].decode())
        pos += size
    return refs


def http_backend(root: Path, method: str, target: str, headers: Mapping[str, str], body: bytes,
                 user: str = "x-access-token", extra_env: Mapping[str, str] | None = None,
                 ) -> tuple[int, list[tuple[str, str]], bytes]:
    """Run `git http-backend` (CGI) for one request on the bare repositories under `root`.

    `target` is the request path with its query; returns (status, headers, payload).
    See https://git-scm.com/docs/git-http-backend for the variables it reads.
    """
    url = urlsplit(target)
    headers = {k.lower(): v for k, v in headers.items()}
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_PROJECT_ROOT": str(root), "GIT_HTTP_EXPORT_ALL": "1",
        "REQUEST_METHOD": method, "PATH_INFO": url.path, "QUERY_STRING": url.query,
        "CONTENT_TYPE": headers.get("content-type", ""), "CONTENT_LENGTH": str(len(body)),
        "HTTP_CONTENT_ENCODING": headers.get("content-encoding", ""),
        "GIT_PROTOCOL": headers.get("git-protocol", ""),
        "REMOTE_USER": user, "REMOTE_ADDR": "127.0.0.1", **(extra_env or {}),
    }
    out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True).stdout
    head, sep, payload = out.partition(b"\r\n\r\n")
    if not sep:
        head, sep, payload = out.partition(b"\n\n")
    fields = [line.split(":", 1) for line in head.decode("latin-1").splitlines() if ":" in line]
    status = next((v.strip() for k, v in fields if k.lower() == "status"), "200 OK")
    return int(status.split()[0]), [(k, v.strip()) for k, v in fields if k.lower() != "status"], payload


class GitHttpServer:
    """`with GitHttpServer(root, password=token) as server: server.url + "owner/repo.git"`."""

    def __init__(self, root: Path, *, password: str, username: str = "x-access-token") -> None:
        self.root = Path(root)
        self.expected = "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()
        self.requests: list[dict[str, str]] = []  # method, path, authorization of every request
        self._server: ThreadingHTTPServer | None = None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._serve()

            def do_POST(self) -> None:
                self._serve()

            def _serve(self) -> None:
                auth = self.headers.get("Authorization", "")
                server.requests.append({"method": self.command, "path": self.path, "authorization": auth})
                if auth != server.expected:
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="git"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, headers, payload = http_backend(server.root, self.command, self.path, self.headers, body)
                self.send_response(status)
                for key, value in headers:
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler

    def __enter__(self) -> "GitHttpServer":
        self._server = start_server(self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_port}/"
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            stop_server(self._server)
