"""Fixtures shared by every test: small git repositories made on the spot, and the modal double."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.sandbox.modal import use_client
from tests.fakes import modal_double

pytest_plugins = ["tests.fakes.anthropic_api", "tests.fakes.github"]


@pytest.fixture(autouse=True, scope="session")
def modal_client() -> Iterator[None]:
    """No test reaches Modal's servers: every SANDBOX_MODE=modal run in the session talks to the local
    double (tests/fakes/modal_double.py). Child processes get it from tests/fakes/decode_modal_double.py."""
    use_client(modal_double)
    yield
    use_client(None)

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.com",
    "GIT_COMMITTER_NAME": "Test Author",
    "GIT_COMMITTER_EMAIL": "author@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "PATH": "/usr/local/bin:/usr/bin:/bin",
}


def git(repo: Path, *args: str) -> str:
    """Run git in `repo` and return its stdout."""
    return subprocess.run(
        # safe.directory: a docker sandbox hands a root-owned workspace to its non-root uid while it runs
        ["git", "-c", "safe.directory=*", *args], cwd=repo, env=GIT_ENV, check=True, capture_output=True, text=True
    ).stdout.strip()


def make_repo(path: Path, files: dict[str, str], branch: str = "main") -> Path:
    """A git repository at `path` with `files` committed on `branch`."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", branch)
    for name, text in files.items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial commit")
    return path


@pytest.fixture
def repo_factory(tmp_path: Path):
    """Call with a dict of files to get a committed repository."""
    counter = iter(range(1000))

    def factory(files: dict[str, str], branch: str = "main") -> Path:
        return make_repo(tmp_path / f"repo{next(counter)}", files, branch)

    return factory


def unhidden_dir(prefix: str) -> Path:
    """A new directory that bwrap shows to its sandboxes: under /opt (where a runner keeps its tool cache),
    not under /tmp, /home or /root, which it hides, wherever this checkout lives. Remove it when done."""
    import secrets

    for parent in (Path("/opt"), Path(__file__).resolve().parents[1] / "build"):
        try:
            parent.mkdir(parents=True, exist_ok=True)
            path = parent / f"{prefix}-{secrets.token_hex(4)}"
            path.mkdir()
            return path
        except OSError:
            continue
    raise OSError("no directory outside bwrap's hidden paths is writable here")
