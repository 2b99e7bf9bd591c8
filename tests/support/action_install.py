"""action.yml's install step on its own, as a new runner pays for it: a fresh RUNNER_TEMP and empty uv and
pip caches, with this machine's package index configuration (tests/test_action_install.py,
bench/action_install.py)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
CONSTRAINTS = ROOT / "action" / "constraints.txt"


def empty_caches(workdir: Path) -> dict[str, str]:
    """PATH and HOME (so the user's pip configuration applies), with uv and pip pointed at new, empty cache
    directories under `workdir`."""
    caches = {"UV_CACHE_DIR": workdir / "uv-cache", "PIP_CACHE_DIR": workdir / "pip-cache"}
    for path in caches.values():
        path.mkdir(parents=True)
    env = {"PATH": os.environ["PATH"], "HOME": os.environ["HOME"]}  # a runner's: nothing else of this process's
    return {**env, **{k: str(v) for k, v in caches.items()}, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def run_install_step(workdir: Path) -> tuple[float, Path]:
    """Seconds action.yml's install step took in a new RUNNER_TEMP under `workdir` with empty caches
    (SANDBOX_MODE=local: no bubblewrap to set up), and the virtualenv it made; RuntimeError with the
    step's output when it fails."""
    temp = workdir / "runner-temp"
    temp.mkdir(parents=True)
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    script = workdir / "install.sh"
    script.write_text(next(s["run"] for s in action["runs"]["steps"] if s["name"] == "Install decode-bot"))
    env = {**empty_caches(workdir), "RUNNER_TEMP": str(temp), "GITHUB_ACTION_PATH": str(ROOT),
           "GITHUB_ENV": str(workdir / "github-env"), "SANDBOX_MODE": "local"}
    return _timed(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], env, workdir), temp / "decode-venv"


def run_pip_install(workdir: Path, requirement: str) -> float:
    """Seconds the Action's former install step took for `requirement`: `python3 -m venv`, then pip in it,
    with an empty pip cache."""
    venv = workdir / "pip-venv"
    env = empty_caches(workdir)
    script = f'python3 -m venv "{venv}" && "{venv}/bin/python" -m pip install --quiet "{requirement}"'
    return _timed(["bash", "-c", script], env, workdir)


def _timed(command: list[str], env: dict[str, str], cwd: Path) -> float:
    start = time.monotonic()
    res = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=900)
    took = time.monotonic() - start
    if res.returncode != 0:
        raise RuntimeError(f"{command[-1]} failed (exit {res.returncode}): {(res.stdout + res.stderr).strip()}")
    return took
