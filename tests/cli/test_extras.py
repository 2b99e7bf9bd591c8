"""Without an extra (pyproject.toml: server, postgres, modal), the command that needs it stops with one line
naming the pip command, as the GitHub Action's install (the core only) would meet it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import DECODE, EXAMPLE, buggy_repo  # noqa: F401 (fixture)

SERVE = {"GITHUB_WEBHOOK_SECRET": "s3cret", "GITHUB_TOKEN": "ghp_" + "0" * 36}


def without(tmp_path: Path, module: str, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`decode ARGS` in a process where `module` cannot be imported, as if its extra were not installed."""
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(f"import sys\nsys.modules[{module!r}] = None\n")
    full = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), "DECODE_DATA_DIR": str(tmp_path / "data"),
            "PYTHONPATH": f"{blocker}:{EXAMPLE.parents[1]}", **env}
    return subprocess.run([DECODE, *args], env=full, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("module", "args", "env", "says"), [
    ("flask", ["serve", "--port", "{port}"], SERVE,
     "decode serve needs flask, which is not installed: pip install 'decode-bot[server] @ "
     "git+https://github.com/decode-bot/decode-bot'"),
    ("flask", ["worker"], SERVE,
     "decode worker needs flask, which is not installed: pip install 'decode-bot[server] @ "
     "git+https://github.com/decode-bot/decode-bot'"),
    ("psycopg", ["serve", "--port", "{port}"], {**SERVE, "DECODE_DATABASE_URL": "postgresql://decode@127.0.0.1:1/none"},
     "DECODE_DATABASE_URL needs psycopg, which is not installed: pip install 'decode-bot[postgres] @ "
     "git+https://github.com/decode-bot/decode-bot'"),
    ("modal", ["run", "--repo", "{repo}", "Fix the weekend check"],
     {"SANDBOX_MODE": "modal", "GITHUB_TOKEN": "ghp_" + "0" * 36},
     "SANDBOX_MODE=modal needs modal, which is not installed: pip install 'decode-bot[modal] @ "
     "git+https://github.com/decode-bot/decode-bot'"),
], ids=["serve without server", "worker without server", "serve on postgres without psycopg", "run on modal"])
def test_a_missing_extra_is_one_line_naming_what_to_install(tmp_path, buggy_repo, fake_anthropic, module, args, env,
                                                            says):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    args = [arg.replace("{repo}", str(buggy_repo)).replace("{port}", port) for arg in args]
    env = {**env, "ANTHROPIC_API_KEY": fake_anthropic.api_key, "ANTHROPIC_BASE_URL": fake_anthropic.url}
    res = without(tmp_path, module, args, env)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and res.stderr.strip().splitlines()[-1] == f"decode: {says}", res.stderr
