"""`decode serve` as a child process against the fake GitHub and the fake Messages API."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.server.conftest import SECRET, delivery
from tests.support.cli import DECODE, EXAMPLE

FILES = {p.name: p.read_text() for p in (EXAMPLE / "repo").iterdir()}
OWNER, NAME = "octo", "calendar"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`decode serve` as a child process on a free port (listening on `host`), its log in a file."""

    def __init__(self, env: dict[str, str], log: Path, port: int | None = None, host: str = "127.0.0.1") -> None:
        self.port = port or free_port()
        self.url = f"http://{'[::1]' if ':' in host else '127.0.0.1'}:{self.port}"
        self.log = log
        with open(log, "ab") as out:
            self.proc = subprocess.Popen([DECODE, "serve", "--host", host, "--port", str(self.port)], env=env,
                                         stdout=out, stderr=out)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(self.url + "/healthz", timeout=1)
                return
            except urllib.error.HTTPError:  # up, and /healthz says why it cannot work (a test may want that)
                return
            except OSError:
                assert self.proc.poll() is None, log.read_text()
                time.sleep(0.1)
        raise AssertionError(f"decode serve did not come up: {log.read_text()}")

    def post(self, event: str, payload: dict, *, secret: str = SECRET) -> int:
        return self.send(*delivery(event, payload, secret=secret))

    def send(self, body: bytes, headers: dict[str, str]) -> int:
        """POST /webhook with `body` and `headers` as given (a redelivery resends both); the status."""
        request = urllib.request.Request(self.url + "/webhook", data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=10) as res:
                return res.status
        except urllib.error.HTTPError as e:
            return e.code

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stacks(self) -> str:
        """The log's warnings and errors, its last lines, then every thread's stack (SIGUSR1,
        bot/server/shutdown.py): what went wrong and where a stuck server waits, for a test's failure message."""
        before = self.log.stat().st_size
        self.proc.send_signal(signal.SIGUSR1)
        time.sleep(2)
        data = self.log.read_bytes()  # split at the byte offset: the log has multi-byte characters
        lines, dump = data[:before].decode(errors="replace").splitlines(), data[before:].decode(errors="replace")
        wrong = [line for line in lines if '"level": "warning"' in line or '"level": "error"' in line]
        return "\n".join(["--- warnings and errors ---", *wrong[:30], "--- the last lines ---", *lines[-40:],
                          "--- stacks ---", dump])

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)


@pytest.fixture
def env(fake_github, fake_anthropic, tmp_path):
    fake_github.add_repo(OWNER, NAME, FILES)
    fake_github.add_user("alice")
    fake_github.set_permission(OWNER, NAME, "alice", "write")
    return {
        "PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"),
        "PYTHONPATH": str(EXAMPLE.parents[1]),  # the server runs this checkout's code, as `decode_run` does
        "GITHUB_WEBHOOK_SECRET": SECRET, "GITHUB_APP_ID": str(fake_github.app_id),
        "GITHUB_APP_PRIVATE_KEY": fake_github.private_key_pem, "GITHUB_API_URL": fake_github.api_url,
        "ANTHROPIC_API_KEY": fake_anthropic.api_key, "ANTHROPIC_BASE_URL": fake_anthropic.url,
        "SANDBOX_MODE": "local", "DECODE_DATA_DIR": str(tmp_path / "data"),
        "DECODE_LEASE_SECONDS": "2", "DECODE_WORKERS": "2",
        **{k: os.environ[k] for k in ("PYTHONPATH",) if k in os.environ},  # the checkout under test, not the venv's
    }


def healthz(server: Server) -> tuple[int, dict]:
    """GET /healthz: its status and JSON body."""
    import json

    try:
        with urllib.request.urlopen(server.url + "/healthz", timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def setup_link(log: str) -> str:
    """The /setup?key=... link `decode serve` logged in setup mode, on a plain line (not JSON) to copy."""
    for line in log.splitlines():
        if not line.startswith("{") and "/setup?key=" in line:
            return line.split(" to create it")[0].rsplit("open ", 1)[1]
    raise AssertionError(f"no setup link in the log: {log}")


def wait_for(condition, timeout: float = 90.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")

