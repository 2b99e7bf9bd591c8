"""`Launcher.death` and `Launcher.stopped`: why a sandbox's process was killed, as the backend knows it (docker's
engine and the container's cgroup, bwrap's cgroup), never read from the command's output; an out-of-memory kill,
of the command or of agentd itself, is the memory cap (issue 33): the sandbox is stopped for good."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.sandbox import SandboxSpec, open_sandbox
from bot.sandbox.client import AgentdSandbox
from bot.sandbox.protocol import CapReached
from tests.sandbox.conftest import IMAGE, require

ALLOCATE = "python3 -c 'x = bytearray(400 * 1024 * 1024); print(len(x))'"
MEMORY_CAP = ("the sandbox passed its memory limit (DECODE_MAX_MEMORY_MB=96): the kernel killed a process in it, "
              "and the sandbox was stopped")


@pytest.fixture(params=[pytest.param("docker", marks=pytest.mark.docker),
                        pytest.param("bwrap", marks=pytest.mark.bwrap)])
def box(workspace: Path, request: pytest.FixtureRequest) -> Iterator[AgentdSandbox]:
    """A docker or bwrap sandbox with 96 MB of memory."""
    require(request.param)
    sandbox = open_sandbox(request.param, SandboxSpec(workspace=workspace, image=IMAGE, memory_mb=96, pids=128,
                                                      cpus=1.0, name="oom-test"))
    yield sandbox
    sandbox.close()


def test_a_sigkill_that_is_not_the_memory_limits_is_an_observation(box: AgentdSandbox) -> None:
    other = box.run("kill -9 $$")
    assert other.exit_code in (137, -9) and "memory" not in other.output, other
    assert box.run("echo alive").output == "alive\n", "the sandbox lives on: only the command was killed"


def agentd_on_host(box: AgentdSandbox) -> int:
    """agentd's pid on the host: the process running agentd.pyz under the sandbox's own (docker: `docker top`;
    bwrap: a descendant of the launcher's process)."""
    launcher: Any = box.launcher
    if getattr(launcher, "container", None):
        top = subprocess.run(["docker", "top", launcher.container, "-eo", "pid,args"], capture_output=True,
                             text=True, check=True).stdout
        return next(int(line.split()[0]) for line in top.splitlines() if "agentd.pyz" in line)
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    under, found = [launcher._transport.pid], []
    while under:
        pid = under.pop()
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if not argv[0].endswith(b"bwrap") and any(a.endswith(b"agentd.pyz") for a in argv):
                found.append(pid)
        under += children.get(pid, [])
    [pid] = found
    return pid


@pytest.mark.parametrize("victim", ["the command", "agentd"])
def test_an_out_of_memory_kill_stops_the_sandbox_at_the_memory_cap(box: AgentdSandbox, victim: str) -> None:
    if victim == "agentd":  # the kernel's first choice; set from the host: agentd is undumpable, so a command may not
        Path(f"/proc/{agentd_on_host(box)}/oom_score_adj").write_text("1000")
    with pytest.raises(CapReached) as cap:
        box.run(ALLOCATE, timeout=60)
    assert (cap.value.stop_reason, str(cap.value)) == ("max_memory", MEMORY_CAP)
    with pytest.raises(CapReached):
        box.run("echo never")  # stopped for good: not restarted, nothing more runs
