"""`Launcher.death`: why a sandbox's process was killed, as the backend knows it (docker's engine and the
container's cgroup, bwrap's cgroup), never read from the command's output."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.sandbox import SandboxSpec, open_sandbox
from bot.sandbox.client import AgentdSandbox
from bot.sandbox.protocol import SandboxDied
from tests.sandbox.conftest import IMAGE, require

ALLOCATE = "python3 -c 'x = bytearray(400 * 1024 * 1024); print(len(x))'"
OOM_LINE = ("[decode] the command was killed: out of memory: the sandbox passed its memory limit of 96 MB "
            "(DECODE_MAX_MEMORY_MB raises it)")


@pytest.fixture(params=[pytest.param("docker", marks=pytest.mark.docker),
                        pytest.param("bwrap", marks=pytest.mark.bwrap)])
def box(workspace: Path, request: pytest.FixtureRequest) -> Iterator[AgentdSandbox]:
    """A docker or bwrap sandbox with 96 MB of memory."""
    require(request.param)
    sandbox = open_sandbox(request.param, SandboxSpec(workspace=workspace, image=IMAGE, memory_mb=96, pids=128,
                                                      cpus=1.0, name="oom-test"))
    yield sandbox
    sandbox.close()


def test_an_out_of_memory_kill_is_named_with_the_limit_and_the_setting(box: AgentdSandbox) -> None:
    killed = box.run(ALLOCATE, timeout=60)
    assert killed.exit_code in (137, -9) and not killed.timed_out, killed
    assert killed.output.splitlines()[-1] == OOM_LINE, killed.output
    assert box.run("echo alive").output == "alive\n", "the sandbox lives on: only the command was killed"
    other = box.run("kill -9 $$")
    assert other.exit_code in (137, -9) and "out of memory" not in other.output, \
        "a SIGKILL that is not the memory limit's is not called one"


def test_a_sandbox_whose_agentd_the_memory_limit_killed_is_named_out_of_memory(box: AgentdSandbox) -> None:
    with pytest.raises(SandboxDied) as died:  # agentd ($PPID) made the kernel's first choice, as a large one is
        box.run("echo 1000 > /proc/$PPID/oom_score_adj && " + ALLOCATE, timeout=60)
    assert str(died.value) == "the sandbox died: " + OOM_LINE.removeprefix("[decode] the command was killed: ")
