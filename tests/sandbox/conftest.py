"""Fixtures for the sandbox tests: every backend this machine can run, as one parameter.

`local` always runs. `bwrap` runs when bubblewrap can create namespaces here and
`docker` when the engine answers and the sandbox image exists. `modal` runs
against tests/fakes/modal_double.py (Modal's servers are out of reach here; tests/conftest.py
injects it for the whole session), which
needs bubblewrap like `bwrap`; it shares the host workspace with the sandbox
(`share_workspace`) because the suite inspects it mid-run. Locally a missing
backend is skipped; with `CI` set it fails instead, so CI never goes green on a
backend it silently did not test.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pwd
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bot.sandbox import Sandbox, SandboxSpec, open_sandbox
from tests.conftest import make_repo
from tests.fakes import modal_double

IMAGE = os.environ.get("DECODE_SANDBOX_IMAGE") or "decode-sandbox:latest"
ROOTLESS_USER = "decode-rootless"  # who runs the rootless engine (scripts/setup-rootless)
MODES = [
    pytest.param("local"),
    pytest.param("bwrap", marks=pytest.mark.bwrap),
    pytest.param("docker", marks=pytest.mark.docker),
    pytest.param("modal", marks=pytest.mark.bwrap),
]
ISOLATED = [p for p in MODES if p.values[0] != "local"]
REPO_FILES = {
    "README.md": "# demo\n",
    "src/app.py": "def main():\n    return 1\n",
    "src/util.py": "def helper():\n    return 2\n",
    "docs/old.txt": "to be deleted\n",
}


@functools.cache
def unavailable(mode: str) -> str | None:
    """Why `mode` cannot run on this machine, or None when it can."""
    if mode in ("bwrap", "modal"):
        if shutil.which("bwrap") is None:
            return "bubblewrap is not installed"
        res = subprocess.run(["bwrap", "--ro-bind", "/", "/", "--unshare-pid", "--unshare-net", "true"],
                             capture_output=True, text=True)
        return None if res.returncode == 0 else f"bwrap cannot create namespaces: {res.stderr.strip()}"
    if mode == "rootless":  # scripts/setup-rootless
        try:
            uid = pwd.getpwnam(ROOTLESS_USER).pw_uid
        except KeyError:
            return f"no user {ROOTLESS_USER}: run scripts/setup-rootless"
        res = subprocess.run(["docker", "-H", f"unix:///run/user/{uid}/docker.sock", "image", "inspect", IMAGE],
                             capture_output=True, text=True)
        return None if res.returncode == 0 else \
            f"the rootless engine or its {IMAGE} is not there ({res.stderr.strip()}): run scripts/setup-rootless"
    if mode == "docker":
        if shutil.which("docker") is None:
            return "the docker CLI is not installed"
        res = subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True, text=True)
        if res.returncode != 0:
            return f"docker or the image {IMAGE} is not available ({res.stderr.strip()}): run sandbox-image/build.sh"
    return None


def require(mode: str) -> None:
    """Skip when `mode` cannot run here; under CI fail, since CI must test every backend."""
    reason = unavailable(mode)
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"SANDBOX_MODE={mode} must work in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    """Each available backend in turn."""
    require(request.param)
    return request.param


@pytest.fixture(params=ISOLATED)
def isolated_mode(request: pytest.FixtureRequest) -> str:
    """The backends that promise isolation (bwrap, docker)."""
    require(request.param)
    return request.param


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A committed git repository to run a sandbox on."""
    return make_repo(tmp_path / "ws", REPO_FILES)


@pytest.fixture
def open_box(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Sandbox]]:
    """Call with (mode, workspace, **spec fields) to open a sandbox closed at teardown."""
    opened: list[Sandbox] = []

    def factory(mode: str, workspace: Path, **spec: object) -> Sandbox:
        fields: dict[str, object] = {"image": IMAGE, "memory_mb": 512, "pids": 256, "cpus": 1.0,
                                     "name": "test"}
        fields.update(spec)
        with modal_double.share_workspace(workspace) if mode == "modal" else contextlib.nullcontext():
            box = open_sandbox(mode, SandboxSpec(workspace=workspace, **fields))  # type: ignore[arg-type]
        opened.append(box)
        return box

    yield factory
    for box in opened:
        box.close()


@pytest.fixture
def sandbox(mode: str, workspace: Path, open_box: Callable[..., Sandbox]) -> Sandbox:
    """An open sandbox of each backend on a fresh repository."""
    return open_box(mode, workspace)
