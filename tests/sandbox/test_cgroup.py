"""The cgroup v2 path, on a fake hierarchy (hosts here run v1; the real v1 path runs in test_bwrap.py)."""

from __future__ import annotations

from pathlib import Path

from bot.sandbox.cgroup import V2_PARENT, SandboxCgroup


def test_v2_cgroup_gets_pids_memory_and_cpu_limits(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (tmp_path / "cgroup.subtree_control").write_text("memory pids\n")
    (tmp_path / V2_PARENT).mkdir()
    (tmp_path / V2_PARENT / "cgroup.subtree_control").write_text("")
    group = SandboxCgroup.create("job 1", memory_mb=256, pids=64, cpus=1.5, root=tmp_path)
    assert group is not None and group.version == 2
    [d] = group.dirs
    assert d.parent == tmp_path / V2_PARENT and d.name.startswith("decode-job_1-")
    assert (d / "pids.max").read_text() == "64"
    assert (d / "memory.max").read_text() == str(256 * 1024 * 1024)
    assert (d / "cpu.max").read_text() == "150000 100000"
    assert (tmp_path / "cgroup.subtree_control").read_text() == "+cpu"
    assert (tmp_path / V2_PARENT / "cgroup.subtree_control").read_text() == "+pids +memory +cpu"
    assert group.wrap(["agentd"])[-1] == "agentd"
    assert f"echo $$ > {d}/cgroup.procs" in group.wrap(["agentd"])[2]


def test_no_usable_hierarchy_means_none(tmp_path: Path) -> None:
    assert SandboxCgroup.create("x", memory_mb=256, pids=64, root=tmp_path) is None
    (tmp_path / "cgroup.controllers").write_text("")  # a hybrid host's empty v2 mount
    assert SandboxCgroup.create("x", memory_mb=256, pids=64, root=tmp_path) is None


def test_a_delegated_parent_gets_the_cgroup_directly_and_nothing_else(tmp_path: Path) -> None:
    delegated = tmp_path / "decode-runner" / "sandboxes"  # what action.yml makes for the runner user
    delegated.mkdir(parents=True)
    (delegated / "cgroup.controllers").write_text("cpu memory pids\n")
    (delegated / "cgroup.subtree_control").write_text("cpu memory pids\n")
    group = SandboxCgroup.create("job", memory_mb=256, pids=64, cpus=1.0, root=tmp_path, parent=delegated)
    assert group is not None and group.version == 2
    [d] = group.dirs
    assert d.parent == delegated and (d / "memory.max").read_text() == str(256 * 1024 * 1024)
    assert not (tmp_path / V2_PARENT).exists(), "the hierarchy root is not touched"
    assert SandboxCgroup.create("job", memory_mb=256, pids=64, parent=tmp_path / "missing") is None


def test_out_of_memory_kills_are_read_from_the_cgroup(tmp_path: Path) -> None:
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "memory.events").write_text("low 0\nhigh 0\nmax 7\noom 3\noom_kill 2\n")
    assert SandboxCgroup([v2], 2).oom_kills() == 2
    pids, memory = tmp_path / "pids", tmp_path / "memory"
    pids.mkdir(), memory.mkdir()
    (memory / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 5\n")
    assert SandboxCgroup([pids, memory], 1).oom_kills() == 5
    assert SandboxCgroup([pids], 1).oom_kills() == 0, "nothing counted where the kernel does not say"
