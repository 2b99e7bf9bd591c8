"""The setup cache under SANDBOX_MODE=modal: the real pipeline against tests/fakes/modal_double.py (Modal's
servers are out of reach; tests/conftest.py injects the double), real git, the scripted model.

A setup that sleeps 4 s (so that skipping it shows above a loaded machine's noise) and writes one file
outside the workspace and HOME (/opt, kept by the snapshot), one under an ignored workspace path (kept by the
archive) and one in HOME (/root, kept by the snapshot).
"""

from __future__ import annotations

import inspect
import tarfile
import time
from pathlib import Path

import pytest

from bot.run.pipeline import Ran
from bot.sandbox import SandboxSpec
from bot.sandbox.egress_policy import EgressPolicy
from bot.sandbox.modal import ModalLauncher
from bot.run.setup_cache import SetupCache
from tests.conftest import git, make_repo
from tests.fakes import modal_double
from tests.support.setup_cache import agent_saw as saw, assert_refused_then_setup_ran, events, make_hostile
from tests.support.setup_cache import (assert_gone_image_refused, assert_new_lock_file_misses,
                                       assert_unpacker_refuses, pull_request_head_run)
from tests.support.setup_cache import run as run_pipeline
from tests.sandbox.conftest import require

pytestmark = pytest.mark.bwrap  # the double runs its sandboxes under bubblewrap
SETUP = ("sleep 4 && echo from-snapshot > /opt/decode-marker && mkdir -p build $HOME/.local && "
         "echo from-workspace > build/marker && echo from-home > $HOME/.local/marker")
FILES = {"README.md": "# app\n", "old.txt": "deleted later\n", ".gitignore": "build/\n",
         "requirements.lock": "a==1\n",
         ".github/decode.yml": f"setup:\n  - {SETUP}\nsetup_cache_key: [requirements.lock]\n"}
CHECK = "cat /opt/decode-marker build/marker $HOME/.local/marker README.md; ls"


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    require("modal")
    return tmp_path / "data"


def run(fake_anthropic, data: Path, repo: Path, run_id: str, **job: str) -> tuple[Ran, float]:
    """The real pipeline on `repo` under modal (the double); the outcome and its wall time."""
    return run_pipeline(fake_anthropic, data, repo, run_id, mode="modal", check=CHECK, **job)


agent_saw = saw


def test_a_second_run_starts_from_the_snapshot_with_a_fresh_workspace(fake_anthropic, tmp_path, data):
    repo = make_repo(tmp_path / "repo", FILES)
    first, first_s = run(fake_anthropic, data, repo, "one")
    assert [e["exit_code"] for e in events(first, "setup")] == [0]
    [miss] = events(first, "setup_cache")
    assert miss["result"] == "miss" and miss["saved"].startswith("saved"), miss
    assert agent_saw(first)[:4] == ["from-snapshot", "from-workspace", "from-home", "# app"]
    (repo / "README.md").write_text("# app, changed\n")
    git(repo, "rm", "-q", "old.txt")
    git(repo, "commit", "-qam", "Change the README, drop old.txt")  # not a key file: a hit, on the new tree
    second, second_s = run(fake_anthropic, data, repo, "two")
    assert events(second, "setup") == []
    [hit] = events(second, "setup_cache")
    assert hit["result"] == "hit" and hit["key"] == miss["key"]
    saw = agent_saw(second)
    assert saw[:4] == ["from-snapshot", "from-workspace", "from-home", "# app, changed"], saw
    assert "old.txt" not in saw, "the snapshot's workspace leaked into the run"
    # setup's `sleep 4` is skipped (no setup event above); the wall times are printed, not compared: the
    # snapshot's restore on the double costs seconds that vary with the machine's load
    print(f"modal (double): setup ran: {first_s:.2f}s, setup skipped: {second_s:.2f}s")
    [entry] = SetupCache(data / "setup-cache").entries()
    assert entry.tag.startswith(f"decode-setup-cache:{entry.key}@im-")
    names = tarfile.open(SetupCache(data / "setup-cache").archive(entry.key)).getnames()
    assert "workspace/build/marker" in names and not any(n.startswith("home/") for n in names), names


def test_a_new_lock_file_misses_and_a_forgotten_snapshot_is_refused(fake_anthropic, tmp_path, data):
    repo = make_repo(tmp_path / "repo", FILES)
    first, _ = run(fake_anthropic, data, repo, "one")
    [entry] = SetupCache(data / "setup-cache").entries()
    modal_double.expire(entry.tag.rpartition("@")[2])  # the snapshot's ttl passed
    again, _ = run(fake_anthropic, data, repo, "again")
    assert_gone_image_refused(again)
    assert_new_lock_file_misses(run, fake_anthropic, data, repo, first, 2)


def test_a_pull_requests_head_uses_the_cache_but_never_fills_it(fake_anthropic, tmp_path, data):
    pull_request_head_run(run, fake_anthropic, data, make_repo(tmp_path / "repo", FILES))


def test_a_hostile_archive_is_refused_and_setup_runs(fake_anthropic, tmp_path, data):
    repo = make_repo(tmp_path / "repo", FILES)
    run(fake_anthropic, data, repo, "one")
    make_hostile(data, "workspace")
    second, _ = run(fake_anthropic, data, repo, "two")
    assert_refused_then_setup_ran(second)


def test_the_sandbox_refuses_to_unpack_through_a_symlink_or_out_of_its_roots(tmp_path, data):
    """The second line of defence: the in-sandbox unpacker, given archives the host would have refused."""
    workspace = make_repo(tmp_path / "ws", {"README.md": "x\n"})
    (workspace / "link").symlink_to("/opt")
    launcher = ModalLauncher(SandboxSpec(workspace=workspace, memory_mb=256, name="cache-test"), pool=0)
    try:
        launcher.start(EgressPolicy()).close()
        assert_unpacker_refuses(launcher, tmp_path, "workspace/link/escape")
        sandbox_root = launcher.sandbox.dir
        assert not (sandbox_root / "escape").exists() and not (sandbox_root / "opt" / "escape").exists()
    finally:
        launcher.close()


@pytest.mark.parametrize("name", ["from_id", "hydrate"])
def test_the_doubles_image_lookup_is_the_real_clients(name: str) -> None:
    """`Image.from_id` and `hydrate` as bot/sandbox/modal.py calls them exist on the installed client, and the
    double takes no parameter the real one does not (as tests/sandbox/test_modal_api.py does for the rest)."""
    modal = pytest.importorskip("modal")
    real = set(inspect.signature(getattr(modal.Image, name)).parameters) - {"self", "cls"}
    double = set(inspect.signature(getattr(modal_double.Image, name)).parameters) - {"self", "cls"}
    assert double <= real, (double, real)
    assert name != "from_id" or "image_id" in real
