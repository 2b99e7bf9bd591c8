"""Limits that hold for the whole sandbox, not per process: memory, time, disk, uid, leftovers, the App key.

Real sandboxes (bwrap, docker) on real workspaces; nothing of ours is patched. An unusable cgroup parent is
simulated by pointing DECODE_CGROUP_PARENT at a directory that is not a cgroup.
"""

from __future__ import annotations

import time
from collections.abc import Callable
import os
import shutil
from pathlib import Path

import pytest

from bot.config import Budget, Settings
from bot.core.errors import ConfigError, DecodeError, SandboxError
from bot.run.setup import run_setup
from bot.core.redact import Redactor
from bot.run.repo_config import RepoConfig
from bot.workspace.run_dirs import fresh_dir
from bot.sandbox import Sandbox, SandboxSpec, open_sandbox
from bot.sandbox.protocol import CapReached
from bot.run.transcript import Transcript
from tests.conftest import make_repo
from tests.sandbox.conftest import open_box, require, workspace  # noqa: F401 (fixtures)
from tests.support.cli import decode_run

BACKENDS = [pytest.param("bwrap", marks=pytest.mark.bwrap), pytest.param("docker", marks=pytest.mark.docker)]
HOG = ("python3 -c \"import time; b = bytearray(150 * 1024 * 1024); b[::4096] = b'x' * len(b[::4096]); "
       "time.sleep(4); print('alive')\"")  # 150 MB touched, held for 4 s


@pytest.mark.parametrize("mode", BACKENDS)
def test_three_processes_together_stay_under_the_memory_cap(mode: str, workspace: Path,
                                                          open_box: Callable[..., Sandbox]) -> None:
    require(mode)
    box = open_box(mode, workspace, memory_mb=256)
    with pytest.raises(CapReached, match="DECODE_MAX_MEMORY_MB=256"):  # three 150 MB processes may not all live
        box.run(f"({HOG}) & ({HOG}) & ({HOG}) & wait", timeout=60)  # `wait` says 0: on docker, seen...
        box.check_caps()  # ...when the loop asks, before it accepts an answer


def test_bwrap_without_a_usable_cgroup_refuses_with_what_to_do(workspace: Path, tmp_path: Path) -> None:
    require("bwrap")
    settings = Settings.from_env({"DECODE_CGROUP_PARENT": str(tmp_path / "not-a-cgroup")})
    spec = SandboxSpec(workspace=workspace, cgroup_parent=settings.sandbox.cgroup_parent, name="limits")
    with pytest.raises(ConfigError) as refused:
        open_sandbox("bwrap", spec)
    message = str(refused.value)
    assert "\n" not in message and "DECODE_CGROUP_PARENT" in message and "run as root" in message


@pytest.mark.parametrize("mode", BACKENDS)
def test_setup_counts_against_the_wall_clock(mode: str, workspace: Path, tmp_path: Path,
                                             open_box: Callable[..., Sandbox]) -> None:
    require(mode)
    box = open_box(mode, workspace)
    budget = Budget(max_wall_s=6)
    transcript = Transcript(tmp_path / "run", Redactor([]))
    began = time.monotonic()
    with pytest.raises(DecodeError, match="stopped at the run's time limit"):
        run_setup(box, RepoConfig(setup=("sleep 25",), setup_timeout=900), transcript, lambda line: None,
                  deadline=began + budget.max_wall_s)
    assert time.monotonic() - began < 10


@pytest.mark.parametrize("mode,into", [pytest.param(b.values[0], into, marks=b.marks) for b in BACKENDS
                                       for into in (".", "/tmp", "/var/tmp") if (b.values[0], into) != ("bwrap", "/var/tmp")])
def test_the_disk_cap_stops_a_writer_wherever_it_writes(mode: str, into: str, workspace: Path,
                                                       open_box: Callable[..., Sandbox]) -> None:
    require(mode)
    beside = set(workspace.parent.iterdir())
    box = open_box(mode, workspace, disk_mb=64)
    with pytest.raises(SandboxError, match="DECODE_MAX_DISK_MB=64"):  # not "No space left on device"
        for _ in range(20):
            box.run(f"for i in $(seq 20); do head -c 20000000 /dev/zero > {into}/big$i; sleep 0.1; done", timeout=60)
    assert sum(p.stat().st_size for p in workspace.glob("big*")) < 400 * 1024 * 1024
    box.close()
    assert set(workspace.parent.iterdir()) == beside  # the sandbox's temp directory went with it


def test_the_docker_agent_is_not_root_and_cannot_chown(workspace: Path, open_box: Callable[..., Sandbox]) -> None:
    require("docker")
    box = open_box("docker", workspace)
    assert box.run("id -u").output.strip() != "0"
    assert box.run("touch f && chown 0:0 f").exit_code != 0
    assert box.run("cp /bin/sh sh && chmod u+s sh && ls -l sh").exit_code == 0
    assert "CapEff:\t0000000000000000" in box.run("grep CapEff /proc/self/status").output


def test_run_directories_are_private(tmp_path: Path) -> None:
    run = fresh_dir(tmp_path / "data" / "runs", "r1")
    for d in (tmp_path / "data", tmp_path / "data" / "runs", run):
        assert d.stat().st_mode & 0o777 == 0o700, d


def test_the_app_key_outside_the_data_dir_is_hidden_from_bwrap(workspace: Path, tmp_path: Path) -> None:
    require("bwrap")
    # A host directory bwrap shows read-only, wherever the checkout is (it replaces /tmp, HOME, /var/tmp...).
    key = Path("/opt/decode-tests") / f"app-key-{os.getpid()}-{tmp_path.name}.pem"
    key.parent.mkdir(exist_ok=True)
    key.write_text("-----BEGIN RSA PRIVATE KEY-----\nSECRETKEYBYTES\n-----END RSA PRIVATE KEY-----\n")
    sibling = key.with_suffix(".txt")  # the same directory, not a secret: the sandbox does read it
    sibling.write_text("VISIBLEBYTES\n")
    try:
        settings = Settings.from_env({"GITHUB_APP_PRIVATE_KEY_PATH": str(key), "DECODE_DATA_DIR": str(tmp_path / "d")})
        with open_sandbox("bwrap", SandboxSpec(workspace=workspace, hide=settings.sandbox.hide, name="k")) as box:
            assert box.run(f"cat {sibling}").output.strip() == "VISIBLEBYTES"
            assert "SECRETKEYBYTES" not in box.run(f"cat {key}").output
    finally:
        key.unlink()
        sibling.unlink()


def test_decode_hide_paths_hides_more_host_paths_from_a_bwrap_run(fake_anthropic, tmp_path: Path) -> None:
    """An operator's other secrets (DECODE_HIDE_PATHS) are as unreadable to the agent as the data dir."""
    require("bwrap")
    base = Path("/opt/decode-tests") / f"hide-{os.getpid()}-{tmp_path.name}"  # shown read-only by bwrap
    creds, single, sibling = base / "creds", base / "token.txt", base / "readme.txt"
    creds.mkdir(parents=True)
    (creds / "secret.txt").write_text("SECRETDIRBYTES\n")
    single.write_text("SECRETFILEBYTES\n")
    sibling.write_text("VISIBLEBYTES\n")  # the same directory, not listed: the agent does read it
    fake_anthropic.script([
        [{"type": "tool_use", "name": "bash",
          "input": {"command": f"cat {creds}/secret.txt {single} {sibling}; ls {creds}"}}],
        [{"type": "text", "text": "Done."}],
    ])
    try:
        res = decode_run(fake_anthropic, tmp_path, make_repo(tmp_path / "repo", {"README.md": "# r\n"}), "look",
                         "bwrap", DECODE_HIDE_PATHS=f"{creds}:{single}")
    finally:
        shutil.rmtree(base)
    assert res.returncode == 0, res.stderr
    [run] = (tmp_path / "data" / "runs").iterdir()
    transcript = (run / "transcript.jsonl").read_text()
    assert "VISIBLEBYTES" in transcript
    assert "SECRETDIRBYTES" not in transcript and "SECRETFILEBYTES" not in transcript


@pytest.mark.parametrize("mode", BACKENDS)
def test_the_workspace_copy_is_gone_after_the_run_and_the_run_dir_is_private(fake_anthropic, tmp_path: Path,
                                                                             mode: str) -> None:
    require(mode)
    repo = make_repo(tmp_path / "repo", {"README.md": "# r\n"})
    fake_anthropic.script([
        [{"type": "tool_use", "name": "bash",
          "input": {"command": "echo more >> README.md && cp /bin/sh kept && chmod 4755 kept"}}],
        [{"type": "text", "text": "Done."}],
    ])
    res = decode_run(fake_anthropic, tmp_path, repo, "append a line", mode)
    assert res.returncode == 0, res.stderr
    [run] = (tmp_path / "data" / "runs").iterdir()
    for d in (tmp_path / "data", tmp_path / "data" / "runs", run):
        assert d.stat().st_mode & 0o777 == 0o700, d
    assert not (run / "workspace").exists(), "the sandbox's copy (setuid files included) is deleted"
    assert not (run / "clean").exists(), "the branch was delivered to the repository: the clone goes too"
