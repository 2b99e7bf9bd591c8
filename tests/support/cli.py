"""The `decode` console script as a user runs it, and the example repository it fixes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import make_repo

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fix-weekend"
SESSION = json.loads((EXAMPLE / "session.json").read_text())
GITHUB_TOKEN = "ghp_" + "T0kenThatMustNeverLeakAnywhere0123456"
DECODE = str(Path(sys.executable).with_name("decode"))  # the console script of this interpreter


@pytest.fixture
def buggy_repo(tmp_path: Path) -> Path:
    files = {p.name: p.read_text() for p in (EXAMPLE / "repo").iterdir()}
    return make_repo(tmp_path / "calendar", files)


def decode_run(fake, tmp_path: Path, repo: Path, task: str, mode: str = "local", *, flags: tuple[str, ...] = (),
               **env: str):
    """Run the `decode` console script as a user would (for SANDBOX_MODE=modal, its entry point with the
    modal double injected), with `flags` before the task; returns the CompletedProcess."""
    command = [sys.executable, "-m", "tests.fakes.decode_modal_double"] if mode == "modal" else [DECODE]
    return subprocess.run([*command, "run", "--repo", str(repo), *flags, task],
                          env=run_env(fake, tmp_path, mode, **env), capture_output=True, text=True, timeout=240)


def run_env(fake, tmp_path: Path, mode: str = "local", **env: str) -> dict[str, str]:
    """The environment `decode_run` gives the console script: the fake API, SANDBOX_MODE=`mode`, a data dir
    and a home in `tmp_path`, and `env` over them."""
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path / "home"),
        "ANTHROPIC_API_KEY": fake.api_key,
        "ANTHROPIC_BASE_URL": fake.url,
        "SANDBOX_MODE": mode,
        "DECODE_DATA_DIR": str(tmp_path / "data"),
        "GITHUB_TOKEN": GITHUB_TOKEN,
        "PYTHONPATH": str(EXAMPLE.parents[1]),
        **env,
    }


def printed(stdout: str, key: str) -> str:
    return next(line.split(": ", 1)[1] for line in stdout.splitlines() if line.startswith(f"{key}: "))

