"""`decode serve` and `decode worker` refuse a key GitHub does not take, in one line and at once, and /healthz
turns 503 when the store or the credentials break while serving. The other start-up inputs (a broken App key,
a busy or impossible port, a refused token, an unreachable GitHub) are rows of tests/test_entry_points.py."""

from __future__ import annotations

import subprocess
import time

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.support.cli import DECODE
from tests.support.server import Server, env, free_port, healthz, wait_for  # noqa: F401 (fixture)


def other_key() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption()).decode()


def refused(env: dict[str, str], *args: str) -> tuple[int, str]:
    """Run `decode *args`, which must exit within a few seconds; (exit code, its one line of output)."""
    began = time.monotonic()
    done = subprocess.run([DECODE, *args], env=env, capture_output=True, text=True, timeout=30)
    assert time.monotonic() - began < 10, "did not fail fast"
    output = (done.stdout + done.stderr).strip()
    assert "Traceback" not in output and len(output.splitlines()) == 1, output
    return done.returncode, output


@pytest.fixture(params=["serve", "worker"])
def command(request) -> list[str]:
    return ["serve", "--port", str(free_port())] if request.param == "serve" else ["worker"]


def test_a_key_github_refuses_stops_start_up_naming_get_app(env, command, fake_github):
    code, line = refused({**env, "GITHUB_APP_PRIVATE_KEY": other_key()}, *command)
    assert code == 2 and "GET /app answered 401" in line and "GITHUB_APP_PRIVATE_KEY" in line, line
    assert [c.status for c in fake_github.calls("GET", "^/app$")] == [401]


def test_healthz_is_503_when_the_store_directory_cannot_be_written(env, fake_github, tmp_path):
    data = tmp_path / "data"
    server = Server(env, tmp_path / "serve.log")
    try:
        wait_for(lambda: healthz(server)[0] == 200, timeout=10, what="/healthz to say ok (the model's check answered)")
        for _ in range(5):
            assert healthz(server) == (200, {"status": "ok"})
        assert len(fake_github.calls("GET", "^/app$")) == 1  # at start-up; /healthz reuses the answer
        data.rename(tmp_path / "elsewhere")  # (a read-only directory would not stop root, which CI runs as)
        status, body = healthz(server)
        assert status == 503 and "DECODE_DATA_DIR" in body["reason"], body
    finally:
        if data.exists():
            data.chmod(0o700)
        server.stop()


def test_healthz_is_503_once_github_refuses_the_app_key(env, fake_github, tmp_path):
    server = Server({**env, "DECODE_HEALTH_RECHECK_SECONDS": "0.5"}, tmp_path / "serve.log")
    try:
        wait_for(lambda: healthz(server)[0] == 200, timeout=10, what="/healthz to say ok (the model's check answered)")
        fake_github.app.replace_key()  # the App's key deleted on its settings page, mid-run
        body = wait_for(lambda: (lambda s, b: b if s == 503 else None)(*healthz(server)), timeout=10,
                        what="/healthz to turn 503")
        assert "GET /app answered 401" in body["reason"], body
    finally:
        server.stop()
    asked = len(fake_github.calls("GET", "^/app$"))
    assert asked < 40, f"/healthz asked GitHub {asked} times: the check is not cached"
