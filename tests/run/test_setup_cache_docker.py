"""The setup cache under SANDBOX_MODE=docker: the real pipeline, a real engine, real git, the scripted model.

A setup that sleeps 2 s and writes one file into the image (/run/lock, the image's one sticky directory
outside the tmpfs mounts that a non-root sandbox user may write), one under an ignored workspace path and one
in HOME; the agent's one tool call cats all three.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.run.pipeline import Ran
from bot.sandbox import SandboxSpec
from bot.sandbox.docker import DockerLauncher
from bot.run.setup_cache import SetupCache
from tests.conftest import git, make_repo
from tests.support.setup_cache import agent_saw as saw, assert_refused_then_setup_ran, events, make_hostile
from tests.support.setup_cache import (assert_gone_image_refused, assert_new_lock_file_misses,
                                       assert_unpacker_refuses, pull_request_head_run)
from tests.support.setup_cache import run as run_pipeline
from tests.sandbox.conftest import IMAGE, require
from tests.support.cli import DECODE
from bot.sandbox import sandbox_spec

pytestmark = pytest.mark.docker
SETUP = ("sleep 2 && echo from-image > /run/lock/decode-marker && mkdir -p build $HOME/.local && "
         "echo from-workspace > build/marker && echo from-home > $HOME/.local/marker")
FILES = {"README.md": "# app\n", ".gitignore": "build/\n", "requirements.lock": "a==1\n",
         ".github/decode.yml": f"setup:\n  - {SETUP}\nsetup_cache_key: [requirements.lock]\n"}
CHECK = "cat /run/lock/decode-marker build/marker $HOME/.local/marker"


@pytest.fixture
def data(tmp_path: Path) -> Iterator[Path]:
    """The data directory; its setup cache entries (and their images) are removed after the test."""
    require("docker")
    yield tmp_path / "data"
    cache = SetupCache(tmp_path / "data" / "setup-cache")
    for entry in cache.entries():
        cache.remove(entry)


def run(fake_anthropic, data: Path, repo: Path, run_id: str, settings: dict | None = None,
        **job: str) -> tuple[Ran, float]:
    """The real pipeline on `repo` under docker (more `settings` if given); the outcome and its wall time."""
    return run_pipeline(fake_anthropic, data, repo, run_id, mode="docker", check=CHECK,
                        settings={"sandbox_image": IMAGE, **(settings or {})}, **job)

def agent_saw(outcome: Ran) -> list[str]:
    """The three marker lines the check printed."""
    return saw(outcome)[:3]


def test_a_second_run_skips_setup_and_finds_its_files(fake_anthropic, tmp_path, data):
    repo = make_repo(tmp_path / "repo", FILES)
    first, first_s = run(fake_anthropic, data, repo, "one")
    assert [e["exit_code"] for e in events(first, "setup")] == [0]
    [miss] = events(first, "setup_cache")
    assert miss["result"] == "miss" and miss["saved"].startswith("saved"), miss
    assert agent_saw(first) == ["from-image", "from-workspace", "from-home"]
    second, second_s = run(fake_anthropic, data, repo, "two")
    assert events(second, "setup") == []
    [hit] = events(second, "setup_cache")
    assert hit["result"] == "hit" and hit["key"] == miss["key"]
    assert "**setup cache:** hit" in second.transcript_md.read_text()
    assert agent_saw(second) == ["from-image", "from-workspace", "from-home"]
    # setup's `sleep` is skipped (no setup event above); the wall times are printed, not compared: they vary
    # with the machine's load by more than the sleep
    print(f"setup ran: {first_s:.2f}s, setup skipped: {second_s:.2f}s")

    [entry] = SetupCache(data / "setup-cache").entries()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "DECODE_DATA_DIR": str(data)}
    listed = subprocess.run([DECODE, "cache", "list"], env=env, capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    [line] = listed.stdout.splitlines()
    assert line.startswith(miss["key"] + "  " + str(repo) + "  ") and " MB  used " in line, line
    cleared = subprocess.run([DECODE, "cache", "clear", miss["key"][:6]], env=env, capture_output=True, text=True,
                             timeout=60)
    assert cleared.returncode == 0 and "removed 1 setup cache entries" in cleared.stderr, cleared.stderr
    assert SetupCache(data / "setup-cache").entries() == []
    gone = subprocess.run(["docker", "image", "inspect", entry.tag],
                          capture_output=True, text=True)
    assert gone.returncode != 0 and "no such image" in gone.stderr.lower()


def test_a_new_lock_file_on_the_base_misses(fake_anthropic, tmp_path, data):
    repo = make_repo(tmp_path / "repo", FILES)
    first, _ = run(fake_anthropic, data, repo, "one")
    [entry] = SetupCache(data / "setup-cache").entries()
    subprocess.run(["docker", "image", "rm", entry.tag], capture_output=True, check=True)
    again, _ = run(fake_anthropic, data, repo, "again")
    assert_gone_image_refused(again)
    assert_new_lock_file_misses(run, fake_anthropic, data, repo, first, 2)


def test_a_hostile_archive_is_refused_and_setup_runs(fake_anthropic, tmp_path, data):
    repo = make_repo(tmp_path / "repo", FILES)
    first, _ = run(fake_anthropic, data, repo, "one")
    make_hostile(data, "workspace")
    second, _ = run(fake_anthropic, data, repo, "two")
    assert_refused_then_setup_ran(second)
    assert agent_saw(second) == ["from-image", "from-workspace", "from-home"]
    assert not (tmp_path / "escape").exists() and not (data / "escape").exists()


def test_the_sandbox_refuses_to_unpack_through_a_symlink_or_out_of_its_roots(tmp_path):
    """The second line of defence: the in-sandbox unpacker, given archives the host would have refused."""
    require("docker")
    workspace = make_repo(tmp_path / "ws", {"README.md": "x\n"})
    (workspace / "link").symlink_to("/etc")
    launcher = DockerLauncher(SandboxSpec(workspace=workspace, image=IMAGE, memory_mb=256, name="cache-test"))
    try:
        assert_unpacker_refuses(launcher, tmp_path, "workspace/link/x")
    finally:
        launcher.close()
    assert not (tmp_path / "escape").exists()


def test_a_pull_requests_head_uses_the_cache_but_never_fills_it(fake_anthropic, tmp_path, data):
    pull_request_head_run(run, fake_anthropic, data, make_repo(tmp_path / "repo", FILES))


def test_a_cache_hit_from_the_warm_pool_skips_setup_and_container_start(fake_anthropic, tmp_path, data):
    """DECODE_POOL_SIZE with the setup cache: the first hit starts the entry's image cold and fills a pool of
    it; the next hit takes a warm container of that image, with setup's files and the run's own workspace."""
    from bot.sandbox import warm_pool

    repo = make_repo(tmp_path / "repo", FILES)
    pooled = {"pool_size": 1}
    try:
        first, _ = run(fake_anthropic, data, repo, "one", settings=pooled)
        second, _ = run(fake_anthropic, data, repo, "two", settings=pooled)
        assert [e["result"] for e in events(second, "setup_cache")] == ["hit"]
        [entry] = SetupCache(data / "setup-cache").entries()
        spec = sandbox_spec(fake_anthropic.settings(sandbox_mode="docker", data_dir=data, pool_size=1).sandbox,
            data, image=entry.tag)
        assert DockerLauncher.pool(spec).wait_full(120)
        third, _ = run(fake_anthropic, data, repo, "three", settings=pooled)
    finally:
        warm_pool.close_all()
    notes = [e["text"] for e in events(third, "note")]
    assert "the docker sandbox came from the warm pool" in notes, notes
    assert "the docker sandbox came from the warm pool" not in [e["text"] for e in events(first, "note")]
    assert [e["result"] for e in events(third, "setup_cache")] == ["hit"] and events(third, "setup") == []
    assert agent_saw(third) == ["from-image", "from-workspace", "from-home"]
    assert third.result.stop_reason == "completed" and third.result.commit is None, "the agent changed nothing"
