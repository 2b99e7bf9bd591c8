"""DECODE_POOL_SIZE under SANDBOX_MODE=docker: warm containers on a real engine, claimed by runs.

A claim must hand the run its own workspace (the files, writes that reach the hand-back), with nothing of an
earlier run or of the pool's slot left, and cost far less than a cold start; what a run leaves goes with it.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from bot.sandbox import SandboxSpec, prepare_host, warm_pool
from bot.sandbox.client import AgentdSandbox
from bot.sandbox.docker import DockerLauncher
from bot.sandbox.docker_pool import leftovers
from tests.conftest import git, make_repo
from tests.sandbox.conftest import IMAGE, REPO_FILES, require

pytestmark = pytest.mark.docker


@pytest.fixture(autouse=True)
def _pools() -> Iterator[None]:
    require("docker")
    yield
    warm_pool.close_all()


def spec(workspace: Path, pool_dir: Path, size: int) -> SandboxSpec:
    return SandboxSpec(workspace=workspace, image=IMAGE, memory_mb=256, pids=128, cpus=1.0, name="pool-test",
                       pool_size=size, pool_dir=pool_dir)


def filled(base: SandboxSpec) -> warm_pool.WarmPool:
    """The pool a server's start-up fills for `base`, once it holds its containers."""
    prepare_host("docker", base)
    pool = DockerLauncher.pool(base)
    assert pool.wait_full(120), pool.last_error
    return pool


def test_a_claimed_container_is_the_run_s_own_and_goes_with_it(tmp_path: Path) -> None:
    pools = tmp_path / "pool"
    base = spec(tmp_path, pools, 1)
    pool = filled(base)
    warm_ids = set(leftovers())

    first = make_repo(tmp_path / "one", REPO_FILES)
    base_sha = git(first, "rev-parse", "HEAD")
    launcher = DockerLauncher(replace(base, workspace=first))
    assert launcher.acquired_from == "pool" and launcher.container in warm_ids, "the warm container is taken over"
    box = AgentdSandbox(launcher, mode="docker")
    try:
        out = box.run("cat src/app.py; ls -A; echo left > /tmp/left-by-one; echo new > added.txt; "
                      "echo '# edited' >> src/app.py && git add -A && git commit -qm 'Edit'").output
        assert "def main" in out and ".git" in out, "the run sees its own workspace, history included"
        hand = box.hand_back(base_sha, max_file_bytes=1 << 20, max_bytes=1 << 24)
        assert b"added.txt" in hand.patch and b"+# edited" in hand.patch, \
            "the agent may change tracked files and commit in a warm container, and its work is handed back"
        container, slot = launcher.container, launcher.slot
        assert slot is not None and (slot / "workspace" / "src" / "app.py").exists()
    finally:
        box.close()
    assert container not in leftovers() and not slot.exists(), "the claimed container and slot go with the run"
    assert (first / "added.txt").read_text() == "new\n" and (first / "added.txt").stat().st_uid == os.getuid(), \
        "the workspace outlives its sandbox: back in the run's directory, the run's own again"
    assert pool.wait_full(120), "a claim is refilled"

    second = make_repo(tmp_path / "two", {"other.txt": "two\n"})
    again = AgentdSandbox(DockerLauncher(replace(base, workspace=second)), mode="docker")
    try:
        out = again.run("ls -A; cat /tmp/left-by-one 2>&1 || true").output
        assert "other.txt" in out and "src" not in out and "added.txt" not in out, out
        assert "No such file" in out, "nothing of the earlier run is seen by the next"
    finally:
        again.close()


def test_a_warm_claim_is_much_faster_than_a_cold_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pools = tmp_path / "pool"
    base = spec(tmp_path, pools, 2)

    def acquire(size: int, n: int) -> float:
        ws = make_repo(tmp_path / f"ws-{size}-{n}", REPO_FILES)
        if size:
            DockerLauncher.pool(replace(base, pool_size=size)).wait_full(120)
        started = time.monotonic()
        box = AgentdSandbox(DockerLauncher(replace(base, workspace=ws, pool_size=size)), mode="docker")
        try:
            assert "def main" in box.run("cat src/app.py").output
            return time.monotonic() - started
        finally:
            box.close()

    cold = statistics.median(acquire(0, n) for n in range(3))
    warm = statistics.median(acquire(2, n) for n in range(3))
    with capsys.disabled():
        print(f"\ndocker: cold start to first command {cold * 1000:.0f} ms, warm claim {warm * 1000:.0f} ms "
              f"({cold / warm:.1f}x)")
    assert warm * 3 < cold, (cold, warm)


def test_start_up_removes_the_slots_of_dead_processes_and_fills_only_with_a_size(tmp_path: Path) -> None:
    pools = tmp_path / "pool"
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = pools / f"{dead.pid}-0123456789ab" / "workspace"
    stale.mkdir(parents=True)
    (stale / "secret-of-a-dead-run").write_text("x")
    mine = pools / f"{os.getpid()}-ba9876543210"
    mine.mkdir()
    prepare_host("docker", spec(tmp_path, pools, 0))
    assert not stale.parent.exists() and mine.exists(), "only a dead process's slots go"
    assert warm_pool._pools == {}, "DECODE_POOL_SIZE=0: no pool, so no container before the first run"


def test_idle_containers_are_replaced_and_an_unused_pool_closes(tmp_path: Path) -> None:
    """The keeper recycles containers that waited too long and closes a pool nobody claims from."""
    base = spec(tmp_path, tmp_path / "pool", 1)
    made: list[object] = []

    def create() -> object:
        launcher = DockerLauncher(replace(base, workspace=make_repo(tmp_path / f"w{len(made)}", REPO_FILES),
                                          pool_size=0))
        made.append(launcher.container)
        return Warm(launcher)

    pool = warm_pool.WarmPool(create, 1, idle_s=1.2, keep_s=3.0)
    pool.refill()
    deadline = time.monotonic() + 60
    while len(made) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(made) >= 2, "a container that waited past 3/4 of idle_s is replaced"
    assert made[0] not in leftovers(), "the replaced container is removed"
    while not pool.closed and time.monotonic() < deadline:
        time.sleep(0.05)
    pool.close()  # joins the keeper, which closed it and is removing its containers
    assert pool.closed and pool.ready() == 0 and not set(made) & set(leftovers()), "an unclaimed pool closes, its containers gone"


class Warm:
    """A pooled cold-started launcher, for the keeper test."""

    def __init__(self, launcher: DockerLauncher) -> None:
        self.launcher = launcher

    def poll(self) -> int | None:
        return None if self.launcher.container is not None else 0

    def terminate(self) -> None:
        self.launcher.close()
