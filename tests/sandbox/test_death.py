"""`Launcher.death`: why a sandbox's process was killed, as the backend knows it (docker's engine and the
container's cgroup, bwrap's cgroup), never read from the command's output."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.sandbox import SandboxSpec, open_sandbox
from tests.sandbox.conftest import IMAGE, require

ALLOCATE = "python3 -c 'x = bytearray(400 * 1024 * 1024); print(len(x))'"
OOM_LINE = ("[decode] the command was killed: out of memory: the sandbox passed its memory limit of 96 MB "
            "(DECODE_MAX_MEMORY_MB raises it)")


@pytest.mark.parametrize("mode", [pytest.param("docker", marks=pytest.mark.docker),
                                  pytest.param("bwrap", marks=pytest.mark.bwrap)])
def test_an_out_of_memory_kill_is_named_with_the_limit_and_the_setting(workspace: Path, mode: str) -> None:
    require(mode)
    box = open_sandbox(mode, SandboxSpec(workspace=workspace, image=IMAGE, memory_mb=96, pids=128, cpus=1.0,
                                         name="oom-test"))
    try:
        killed = box.run(ALLOCATE, timeout=60)
        assert killed.exit_code in (137, -9) and not killed.timed_out, killed
        assert killed.output.splitlines()[-1] == OOM_LINE, killed.output
        assert box.run("echo alive").output == "alive\n", "the sandbox lives on: only the command was killed"
        other = box.run("kill -9 $$")
        assert other.exit_code in (137, -9) and "out of memory" not in other.output, \
            "a SIGKILL that is not the memory limit's is not called one"
    finally:
        box.close()
