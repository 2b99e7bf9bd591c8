"""Fixtures shared by every test: small git repositories made on the spot, and the modal double."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.sandbox.modal import use_client
from tests.fakes import modal_double

pytest_plugins = ["tests.fakes.anthropic_api", "tests.fakes.anthropic_bedrock", "tests.fakes.anthropic_vertex",
                  "tests.fakes.github", "tests.support.stores"]

TIERS = ("unit", "integration", "e2e")
# What makes a test e2e: its module drives the real console script or server process (names imported
# from tests/support), or the test runs action.yml through the runner emulation.
E2E_NAMES = frozenset({"DECODE", "decode_run", "Server"})
E2E_FIXTURES = frozenset({"runner"})
# What makes a test integration: a real component behind a fixture (the fake HTTP servers, the fake
# internet, a sandbox backend, git repositories made on the spot)...
INTEGRATION_FIXTURES = frozenset({
    "fake_github", "fake_anthropic", "fake_bedrock", "fake_vertex", "internet", "world", "repo_factory", "buggy_repo",
    "mode", "isolated_mode", "sandbox", "open_box", "workspace", "browser", "store_factory", "postgres_factory",
})
# ...a module that drives real git, a sandbox, the docker image or other processes directly...
INTEGRATION_NAMES = frozenset({"git", "make_repo", "GIT_ENV", "require", "IMAGE", "unhidden_dir", "subprocess",
                               "multiprocessing", "FakeAnthropic", "FakeGitHub"})
INTEGRATION_DIRS = ("sandbox", "security")
# ...or a module listed here: slow for a unit test although in process (measured with `pytest -m unit
# --durations=0`; keep the unit tier under 30 s).
INTEGRATION_MODULES: frozenset[str] = frozenset()


def tier(item: pytest.Item) -> str:
    """The one test tier of `item`, by this rule, first match wins:

    - e2e: its module imports a driver of the real console script or server (`DECODE`, `decode_run`,
      `Server` from tests/support), or it uses the `runner` fixture (action.yml under the runner emulation);
    - integration: it uses a fixture that stands up a real component (E2E/INTEGRATION_FIXTURES: the fake
      GitHub and Messages API servers, the fake internet, sandboxes, git repositories), or its module
      imports git, sandbox or process helpers (INTEGRATION_NAMES, `subprocess` among them), lives under tests/sandbox/ or tests/security/,
      or is listed in INTEGRATION_MODULES, or it carries the docker or bwrap marker;
    - unit: everything else: in process, no subprocess, no server, no sandbox; `pytest -m unit` runs
      in well under 30 s.
    """
    module = vars(getattr(item, "module", None) or object)
    fixtures = set(getattr(item, "fixturenames", ()))
    path = Path(str(item.path)).resolve().relative_to(Path(__file__).resolve().parents[1]).as_posix()
    if E2E_NAMES & module.keys() or E2E_FIXTURES & fixtures:
        return "e2e"
    if (INTEGRATION_FIXTURES & fixtures or INTEGRATION_NAMES & module.keys()
            or path.split("/")[1] in INTEGRATION_DIRS or path in INTEGRATION_MODULES
            or item.get_closest_marker("docker") or item.get_closest_marker("bwrap")):
        return "integration"
    return "unit"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test with exactly one tier (see `tier`): `pytest -m unit` is the fast tier."""
    for item in items:
        item.add_marker(tier(item))


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
