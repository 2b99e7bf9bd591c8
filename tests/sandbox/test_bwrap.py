"""What only the bwrap backend promises: its cgroup, its view of the host."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from bot.sandbox import EgressPolicy, Refused, SandboxSpec
from bot.sandbox.bwrap import BwrapLauncher
from bot.sandbox.client import AgentdSandbox
from tests.conftest import make_repo, unhidden_dir
from tests.sandbox.conftest import REPO_FILES, require

pytestmark = pytest.mark.bwrap


@pytest.fixture(autouse=True)
def _bwrap_available() -> None:
    require("bwrap")


def open_bwrap(workspace: Path, **kwargs: object) -> AgentdSandbox:
    spec = SandboxSpec(workspace=workspace, memory_mb=256, pids=128, cpus=1.0, name="bwrap-test")
    return AgentdSandbox(BwrapLauncher(spec, **kwargs), mode="bwrap")  # type: ignore[arg-type]


def test_cgroup_limits_the_sandbox_and_is_removed_on_close(workspace: Path) -> None:
    with open_bwrap(workspace) as box:
        cgroup = box._launcher.cgroup  # type: ignore[attr-defined]
        dirs = list(cgroup.dirs)
        names = ("pids.max", "memory.limit_in_bytes", "memory.max")
        files = {n: (d / n).read_text().strip() for d in dirs for n in names if (d / n).exists()}
        assert files.get("pids.max") == "128"
        assert str(256 * 1024 * 1024) in (files.get("memory.limit_in_bytes"), files.get("memory.max"))
        assert len(cgroup.pids()) >= 2, "bwrap and agentd run inside it"
    assert not any(d.exists() for d in dirs)


def test_no_capabilities_and_no_mounts(workspace: Path) -> None:
    with open_bwrap(workspace) as box:
        assert "CapEff:\t0000000000000000" in box.run("grep CapEff /proc/self/status").output
        assert box.run("echo x > /usr/planted").exit_code != 0
        assert box.run("python3 -c \"import os; os.umount('/root')\" 2>&1 || "
                       "umount /root 2>&1").exit_code != 0
        assert box.run("ls -A /root").output.split() in ([], [".pyenv"])


def test_data_dir_and_sibling_workspaces_are_hidden(tmp_path: Path) -> None:
    data = tmp_path / "data"
    workspace = make_repo(data / "workspaces" / "job1", REPO_FILES)
    (data / "workspaces" / "job2").mkdir()
    (data / "workspaces" / "job2" / "stolen.txt").write_text("other job\n")
    (data / "jobs.sqlite3").write_text("tokens\n")
    with open_bwrap(workspace, hide=[data]) as box:
        out = box.run(f"cat {data}/jobs.sqlite3 {data}/workspaces/job2/stolen.txt; ls -A {data}").output
        assert "tokens" not in out and "other job" not in out and "workspaces" not in out.split()
        assert box.run("ls").output.split() == ["README.md", "docs", "src"]
        with pytest.raises(Refused):
            box.read_file(f"{data}/jobs.sqlite3")


def test_tmp_is_private_survives_set_network_and_is_removed(workspace: Path) -> None:
    with open_bwrap(workspace) as box:
        host_tmp = box._launcher._tmp  # type: ignore[attr-defined]
        box.run("echo kept > /tmp/setup.txt; mkdir -p ~/.local && echo x > ~/.local/pkg")
        box.set_network(EgressPolicy(internet=True))
        assert box.run("cat /tmp/setup.txt ~/.local/pkg").output == "kept\nx\n"
        box.set_network(EgressPolicy())
        assert box.run("cat /tmp/setup.txt").output == "kept\n"
        assert "decode-bwrap-" not in box.run("ls -A /tmp").output
    assert not host_tmp.exists()


def test_the_network_namespace_is_always_its_own_with_loopback_up(workspace: Path) -> None:
    launcher = BwrapLauncher(SandboxSpec(workspace=workspace))
    egress = launcher.egress.directory
    with AgentdSandbox(launcher, mode="bwrap", network=EgressPolicy(internet=True)) as box:
        argv = launcher.argv()
        assert "--unshare-net" in argv and "--clearenv" in argv and "--cap-drop" in argv
        assert argv[argv.index(str(egress)) - 1] == "--ro-bind", "the proxy's directory is bound read-only"
        assert box.run("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '").output.split() == ["lo"]
        up = "python3 -c \"import socket; s = socket.create_server(('127.0.0.1', 0)); " \
             "socket.create_connection(s.getsockname()).close(); print('lo is up')\""
        assert box.run(up).output == "lo is up\n"
        assert box.run("touch /run/decode-egress/x").exit_code != 0
        assert egress.stat().st_mode & 0o777 == 0o700
    assert not egress.exists(), "the proxy and its directory go with the sandbox"


def test_visible_host_path_entries_come_first_and_hidden_ones_are_dropped(tmp_path: Path, workspace: Path) -> None:
    tools = unhidden_dir("decode-toolchain") / "bin"  # like a runner's /opt/hostedtoolcache/<tool>/<ver>/x64/bin
    tools.mkdir()
    try:
        (tools / "decode-fake-tool").write_text("#!/bin/sh\necho tool\n")
        (tools / "decode-fake-tool").chmod(0o755)
        hidden = tmp_path / "home" / ".cargo" / "bin"
        hidden.mkdir(parents=True)
        entries = (str(tools), str(hidden), "relative/bin", "/nonexistent/bin", os.path.join(sys.prefix, "bin"))
        spec = SandboxSpec(workspace=workspace, name="bwrap-test", path=entries, hide=(tmp_path / "home",))
        with AgentdSandbox(BwrapLauncher(spec), mode="bwrap") as box:
            path = box.run("echo $PATH").output.strip().split(":")
            assert path[:2] == ["/tmp/.local/bin", str(tools)] and "/usr/bin" in path  # setup's installs first
            assert not {str(hidden), "relative/bin", "/nonexistent/bin"} & set(path)
            assert box.run("decode-fake-tool").output == "tool\n"
            assert os.path.join(sys.prefix, "bin") not in path, "the harness's own virtualenv is not the agent's"
    finally:
        shutil.rmtree(tools.parent)
