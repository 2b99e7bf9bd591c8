"""The setup cache under SANDBOX_MODE=bwrap: the real pipeline, real bubblewrap, real git, the scripted model.

A setup that sleeps 2 s and writes one file under an ignored workspace path and one in HOME (/tmp, the
sandbox's own host directory); the agent's one tool call cats both. bwrap keeps no image: the archive is the
whole entry, and the key's base is the host toolchain's digest.
"""

from __future__ import annotations

import subprocess
import sys
import os
import shutil
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.run.pipeline import Ran
from bot.sandbox import SandboxSpec
from bot.sandbox.bwrap import BwrapLauncher, toolchain_digest
from bot.run.setup_cache import SetupCache
from tests.conftest import git, make_repo
from tests.support.setup_cache import agent_saw as saw, assert_refused_then_setup_ran, events, make_hostile
from tests.support.setup_cache import (assert_gone_image_refused, assert_new_lock_file_misses,
                                       assert_unpacker_refuses, pull_request_head_run)
from tests.support.setup_cache import run as run_pipeline
from tests.sandbox.conftest import require

pytestmark = pytest.mark.bwrap
SETUP = ("sleep 2 && mkdir -p build $HOME/.local && echo from-workspace > build/marker && "
         "echo from-home > $HOME/.local/marker")
FILES = {"README.md": "# app\n", ".gitignore": "build/\n", "requirements.lock": "a==1\n",
         ".github/decode.yml": f"setup:\n  - {SETUP}\nsetup_cache_key: [requirements.lock]\n"}
CHECK = "cat build/marker $HOME/.local/marker README.md; ls"


@pytest.fixture
def data(tmp_path: Path) -> Iterator[Path]:
    require("bwrap")
    yield tmp_path / "data"


def run(fake_anthropic, data: Path, repo: Path, run_id: str, **job: str) -> tuple[Ran, float]:
    """The real pipeline on `repo` under bwrap; the outcome and its wall time."""
    return run_pipeline(fake_anthropic, data, repo, run_id, mode="bwrap", check=CHECK, **job)


agent_saw = saw


def test_a_second_run_skips_setup_and_finds_its_files(fake_anthropic, tmp_path, data):
    repo = make_repo(tmp_path / "repo", FILES)
    first, first_s = run(fake_anthropic, data, repo, "one")
    assert [e["exit_code"] for e in events(first, "setup")] == [0]
    [miss] = events(first, "setup_cache")
    assert miss["result"] == "miss" and miss["saved"].startswith("saved"), miss
    assert agent_saw(first)[:3] == ["from-workspace", "from-home", "# app"]
    (repo / "README.md").write_text("# app, changed\n")
    (repo / "notes.txt").write_text("new\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "Change the README")  # not a key file: still a hit, on the new tree
    second, second_s = run(fake_anthropic, data, repo, "two")
    assert events(second, "setup") == []
    [hit] = events(second, "setup_cache")
    assert hit["result"] == "hit" and hit["key"] == miss["key"]
    assert "**setup cache:** hit" in second.transcript_md.read_text()
    saw = agent_saw(second)
    assert saw[:3] == ["from-workspace", "from-home", "# app, changed"] and "notes.txt" in saw, saw
    # setup's `sleep` is skipped (no setup event above); the wall times are printed, not compared: they vary
    # with the machine's load by more than the sleep
    print(f"bwrap: setup ran: {first_s:.2f}s, setup skipped: {second_s:.2f}s")
    [entry] = SetupCache(data / "setup-cache").entries()
    assert entry.mode == "bwrap" and entry.image_id.startswith("bwrap:")
    names = tarfile.open(SetupCache(data / "setup-cache").archive(entry.key)).getnames()
    assert "workspace/build/marker" in names and "home/.local/marker" in names, names


def test_a_new_lock_file_on_the_base_misses(fake_anthropic, tmp_path, data):
    repo = make_repo(tmp_path / "repo", FILES)
    first, _ = run(fake_anthropic, data, repo, "one")
    assert_new_lock_file_misses(run, fake_anthropic, data, repo, first, 2)


def test_a_pull_requests_head_uses_the_cache_but_never_fills_it(fake_anthropic, tmp_path, data):
    repo = make_repo(tmp_path / "repo", FILES)
    pull_request_head_run(run, fake_anthropic, data, repo)
    run(fake_anthropic, data, repo, "base")
    head, _ = run(fake_anthropic, data, repo, "head2", base="feature", config_base="main")
    assert [e["result"] for e in events(head, "setup_cache")] == ["hit"]
    assert agent_saw(head)[:3] == ["from-workspace", "from-home", "# changed by a pull request"]


def test_a_hostile_archive_is_refused_and_setup_runs(fake_anthropic, tmp_path, data):
    repo = make_repo(tmp_path / "repo", FILES)
    run(fake_anthropic, data, repo, "one")
    make_hostile(data, "home")
    second, _ = run(fake_anthropic, data, repo, "two")
    assert_refused_then_setup_ran(second)
    assert agent_saw(second)[:2] == ["from-workspace", "from-home"]


def test_the_sandbox_refuses_to_unpack_through_a_symlink_or_out_of_its_roots(tmp_path):
    """The second line of defence: the in-sandbox unpacker, given archives the host would have refused."""
    require("bwrap")
    workspace = make_repo(tmp_path / "ws", {"README.md": "x\n"})
    (workspace / "link").symlink_to(tmp_path)
    launcher = BwrapLauncher(SandboxSpec(workspace=workspace, memory_mb=256, name="cache-test"))
    try:
        assert_unpacker_refuses(launcher, tmp_path, "workspace/link/escape")
    finally:
        launcher.close()
    assert not (tmp_path / "escape").exists() and not (tmp_path / "ws" / "escape").exists()


def test_the_base_follows_the_host_toolchain(tmp_path):
    """A tool replaced in a directory on the sandbox's PATH, or a new one, changes the key's base; a PATH
    entry the sandbox cannot see (under the host's /tmp, which it never shows) does not count."""
    hidden = tmp_path / "bin"
    hidden.mkdir()
    (hidden / "tool").write_text("#!/bin/sh\n")
    assert toolchain_digest([str(hidden)]) == toolchain_digest([])
    try:
        shown = Path(tempfile.mkdtemp(prefix="decode-test-toolcache-", dir="/var/cache"))  # shown to a sandbox
    except PermissionError:
        pytest.skip("needs a writable directory that a bwrap sandbox shows: /var/cache (root)")
    try:
        (shown / "tool").write_text("#!/bin/sh\necho 1\n")
        before = toolchain_digest([str(shown)])
        assert toolchain_digest([str(shown)]) == before and toolchain_digest([]) != before
        (shown / "tool").write_text("#!/bin/sh\necho 2.0\n")
        assert toolchain_digest([str(shown)]) != before
        again = toolchain_digest([str(shown)])
        os.symlink("tool", shown / "tool2")
        assert toolchain_digest([str(shown)]) != again
    finally:
        shutil.rmtree(shown)


HARNESS_SAVES = """
import sys, tarfile
from pathlib import Path
from bot.sandbox import SandboxSpec
from bot.sandbox.bwrap import BwrapLauncher
workspace, archive = Path(sys.argv[1]), Path(sys.argv[2])
launcher = BwrapLauncher(SandboxSpec(workspace=workspace, memory_mb=256, name="cache-test"))
try:
    (launcher._tmp / ".local").mkdir()
    (launcher._tmp / ".local" / "marker").write_text("setup's")
    launcher.save_setup_cache("decode-setup-cache:x", archive, 1 << 30)
finally:
    launcher.close()
print(sorted(tarfile.open(archive).getnames()))
"""


def test_a_harness_under_the_host_tmp_is_not_archived_as_home(tmp_path):
    """bwrap binds the harness's Python back at its host path; from a checkout under /tmp (a CI clone) that
    lands in the sandbox's HOME (/tmp), and the HOME archive must leave it out: it is neither setup's nor
    something the restore could write."""
    require("bwrap")
    top = Path(tempfile.mkdtemp(dir="/tmp", prefix="decode-harness-"))
    try:
        venv = top / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
        [site] = (venv / "lib").glob("python3*/site-packages")
        here = [str(Path(__file__).resolve().parents[2])] + [p for p in sys.path if p.endswith("site-packages")]
        (site / "decode-harness.pth").write_text("\n".join(here) + "\n")
        workspace = make_repo(tmp_path / "ws", {"README.md": "x\n"})
        done = subprocess.run([str(venv / "bin" / "python"), "-c", HARNESS_SAVES, str(workspace), str(tmp_path / "a.tar")],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split("\n")[0] == "['home/.local', 'home/.local/marker']", done.stdout
    finally:
        shutil.rmtree(top, ignore_errors=True)
