"""The sandbox protocol: the roles, the values they pass and the errors they raise.

Backends (`local.py`, `bwrap.py`, `docker.py`, `modal.py`) and the one client
(`client.py`) import this module; the table that picks a backend by name lives
in `bot/sandbox/__init__.py`, which imports them all. So no backend imports the
package that imports it.
"""

from __future__ import annotations

import queue
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Protocol

from bot.core.errors import SandboxError
from bot.sandbox.egress_policy import EgressPolicy


@dataclass(frozen=True)
class CommandResult:
    """What a command did. A failed command is an observation, not an exception."""

    exit_code: int | None  # None when the command was killed by its timeout
    output: str  # stdout and stderr interleaved, capped by the sandbox
    timed_out: bool
    duration_s: float
    dropped_bytes: int = 0


@dataclass(frozen=True)
class ServerLines:
    """What an MCP server in the sandbox wrote after one line sent to it (`Sandbox.mcp_io`): its whole lines,
    the sizes of lines too long to carry, whether the wait timed out, and, once it ended, its exit status
    (None when unknown) and its stderr's tail."""

    lines: tuple[str, ...]
    oversize: tuple[int, ...] = ()
    timed_out: bool = False
    exited: bool = False
    status: int | None = None
    stderr: str = ""


@dataclass(frozen=True)
class HandBack:
    """The agent's changes as a binary patch, and what the sandbox left out of it (path -> why)."""

    patch: bytes
    left_out: dict[str, str]


@dataclass(frozen=True)
class Death:
    """Why a sandbox (or a process in it) was killed, as the backend tells it (`Launcher.death`), in words."""

    reason: str
    oom: bool = False  # the kernel killed it for passing the sandbox's memory limit


def out_of_memory(limit_mb: int) -> Death:
    """The death of a process killed for passing the sandbox's `limit_mb`, naming the setting that raises it."""
    return Death(f"out of memory: the sandbox passed its memory limit of {limit_mb} MB (DECODE_MAX_MEMORY_MB "
                 "raises it)", oom=True)


@dataclass(frozen=True)
class Cap:
    """A cap the backend stopped the sandbox for, for good: the run's stop reason (bot/agent/loop.py's
    `STOP_MESSAGES`) and the message naming the setting that raises it."""

    stop_reason: str  # "max_disk" or "max_memory"
    message: str


def memory_cap(limit_mb: int) -> Cap:
    """The memory cap, passed: the kernel killed a process of the sandbox for passing `limit_mb`."""
    return Cap("max_memory", f"the sandbox passed its memory limit (DECODE_MAX_MEMORY_MB={limit_mb}): the kernel "
                             "killed a process in it, and the sandbox was stopped")


def stopped_from_outside(status: int | None, what: str = "the sandbox") -> Death:
    """The death of a sandbox stopped by something outside it (an engine restart, an eviction, a `kill`), with
    its exit status as a shell shows it (a signal `n` as 128 + n) and the signal."""
    if status is None:
        return Death(f"{what} was stopped from outside (its exit status is unknown)")
    status = 128 - status if status < 0 else status
    signal = f" / signal {status - 128}" if status > 128 else ""
    return Death(f"{what} was stopped from outside (exit status {status}{signal})")


@dataclass(frozen=True)
class SandboxSpec:
    """What to start: the host workspace and the limits it runs under."""

    workspace: Path
    image: str = "decode-sandbox:latest"
    memory_mb: int = 4096
    cpus: float = 2.0
    pids: int = 1024
    name: str = "decode"
    hide: tuple[Path, ...] = ()  # host paths an isolating backend must not show (the data dir)
    path: tuple[str, ...] = ()  # bwrap: host PATH entries (a runner's toolchains) to put first on the sandbox's PATH
    gpu: str | None = None  # e.g. "H200:4"; only a backend with `Capabilities.gpu` offers GPUs
    lifetime_s: int = 3 * 3600  # modal: the sandbox is terminated after this long, whatever happens
    cgroup_parent: Path | None = None  # bwrap: a delegated cgroup v2 directory to make the sandbox's cgroup in
    disk_mb: int = 10240  # what the agent may write: workspace plus temp (local, bwrap, docker; see disk.py)
    hand_back_only: bool = False  # opened only to hand the work back after a cap stopped the agent: no disk poller
    pool_size: int = 0  # docker, modal: warm sandboxes like this one kept ready per process (DECODE_POOL_SIZE)
    pool_dir: Path | None = None  # docker: where warm containers' workspaces wait (DECODE_DATA_DIR/pool); None: no pool
    # Waits until the workspace's files are in place (a run's checkout goes on while its sandbox starts,
    # bot.workspace.clone): a launcher calls it before it reads, moves or uploads them, `open_sandbox` before
    # it hands the sandbox out. None: they are in place.
    ready: Callable[[], None] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Capabilities:
    """What a backend offers, declared on its launcher class: the pipeline and the server ask this,
    never a backend by name."""

    isolating: bool  # commands cannot reach the host's processes, files or secrets (may run a fork's code)
    egress_policy: bool  # an `EgressPolicy` is enforced (otherwise the agent has the host's network as it is)
    image: bool  # runs `spec.image` (`DECODE_SANDBOX_IMAGE`, `image:` in .github/decode.yml)
    gpu: bool  # gives the sandbox `spec.gpu`
    pool: bool  # can keep warm sandboxes ready (`DECODE_POOL_SIZE`)
    setup_cache: bool = False  # can keep the state setup left and start later sandboxes from it (bot/run/setup_cache.py)
    keeps_workspace: bool = True  # the workspace is the host's directory, so a new sandbox sees every change;
    # False (modal: a copy is uploaded): the harness checkpoints the changes and restores them (bot/run/restart.py)


class Refused(SandboxError):
    """agentd declined a request (a path outside the workspace, a missing file...)."""


class CapReached(SandboxError):
    """The backend stopped the sandbox for passing a cap (the disk, the memory: `Launcher.stopped`): the agent
    stops at once, and the work so far is handed back from a sandbox opened for that alone and committed as
    incomplete, with the cap's stop reason."""

    def __init__(self, cap: Cap) -> None:
        super().__init__(cap.message)
        self.stop_reason = cap.stop_reason


class SandboxLost(SandboxError):
    """The sandbox died and the run cannot go on in a new one (past DECODE_MAX_RESTARTS, or its workspace is
    gone): the agent stops there, and the work so far is handed back and committed as incomplete."""


class SandboxDied(SandboxError):
    """The sandbox died under a call (agentd's channel ended); `death` says why, as the backend knows it."""

    def __init__(self, death: Death) -> None:
        super().__init__(f"the sandbox died: {death.reason}")
        self.death = death


ANSWER_CAP = 256 * 1024 * 1024  # bytes of one line from agentd the host reads: past any answer of a sound agentd
# (the largest, an MCP call's output, is cut at 33 MB, which JSON's escapes can make at most 6 times longer)


def overlong() -> SandboxDied:
    """The death of a sandbox whose agentd sent a line past `ANSWER_CAP`: the host does not trust what runs in a
    sandbox (on Modal, its root can reach agentd), so it reads no further than that, and starts a new one."""
    return SandboxDied(Death(f"agentd sent a line of more than {ANSWER_CAP // (1024 * 1024)} MB, more than any "
                             "answer of its; the host stopped reading it"))


class QueuedLines:
    """The reading half of a transport: agentd's lines, put on `_lines` by the transport's pump thread (None once
    the channel ended, `overlong` set first when it ended at a line past `ANSWER_CAP`), taken by `recv`."""

    def __init__(self) -> None:
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self.overlong = False

    def recv(self, timeout: float) -> bytes | None:
        """The next line; None once the channel ended; TimeoutError past `timeout`; `overlong()` raised when it
        ended at a line past the cap."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError from None
        if line is None and self.overlong:
            raise overlong()
        return line


class Transport(Protocol):
    """A line-oriented duplex channel to a running agentd: `recv` raises `overlong()` once agentd sent a line past
    `ANSWER_CAP`, of which it kept nothing."""

    def send(self, line: bytes) -> None: ...

    def recv(self, timeout: float) -> bytes | None: ...

    def close(self) -> None: ...

    def diagnostics(self) -> str: ...


class Launcher(Protocol):
    """One backend: starts agentd for a workspace, reaching what an `EgressPolicy` allows.

    Constructed as `Launcher(spec)`. `capabilities`, `prepare_host` and `preflight` are read on the class,
    without starting anything.
    """

    capabilities: ClassVar[Capabilities]
    root: str  # the workspace's path as seen inside the sandbox

    def __init__(self, spec: SandboxSpec) -> None: ...

    @classmethod
    def prepare_host(cls, spec: SandboxSpec) -> None:
        """Once, when a long-running host (`decode serve`, `decode worker`) starts, before its first job."""
        ...

    @classmethod
    def preflight(cls) -> None:
        """Before any work, in every door: a `ConfigError` naming the fix when this backend cannot start here
        for want of a setting or a service (modal: its credentials; docker: an engine that answers)."""
        ...

    def start(self, policy: EgressPolicy) -> Transport: ...

    def death(self) -> Death:
        """Why the sandbox or a process in it was killed, asked of the backend (never read from a command's
        output) after agentd's channel ended: an out-of-memory kill since the last answer (which is also the
        memory cap, `stopped`), else how it was stopped."""
        ...

    def stopped(self, now: bool = False, disk: bool = True) -> Cap | None:
        """The cap the sandbox was stopped for, for good (the disk, see disk.py; the memory: an out-of-memory
        kill in the sandbox's cgroup), or None. `now`: measure first (the disk walked once more, the memory's
        kill count asked) instead of telling what was seen so far; `disk` False: the memory's kill count alone is
        asked (after a failed command; the disk poller and the check before an answer cover the disk). A sandbox
        opened only to hand the work back (`spec.hand_back_only`) is never stopped."""
        ...

    def blocked(self) -> dict[str, int]: ...

    def close(self) -> None: ...


class CopiesWorkspace(Protocol):
    """A launcher whose sandbox works on an uploaded copy of the workspace (`Capabilities.keeps_workspace` is
    False): a new sandbox gets the changes a dead one had back from the harness's checkpoint."""

    def restore_changes(self, patch: bytes) -> None:
        """Apply `patch` (a hand-back since the base) to the new sandbox's workspace."""
        ...


class Sandbox(Protocol):
    """The agent's view of the workspace. Paths are relative to `root`."""

    root: str
    mode: str

    def run(self, command: str, *, timeout: float = 120.0) -> CommandResult: ...

    def read_file(self, path: str) -> bytes: ...

    def write_file(self, path: str, data: bytes) -> None: ...

    def glob(self, pattern: str, path: str = ".") -> list[str]: ...

    def grep(self, pattern: str, path: str = ".", glob: str | None = None) -> list[str]: ...

    def export_patch(self, base_sha: str) -> bytes: ...

    def hand_back(self, base_sha: str, *, max_file_bytes: int | None = None,
                  max_bytes: int | None = None) -> HandBack: ...

    def check_hand_back(self, base_sha: str, *, max_file_bytes: int | None = None) -> dict[str, str]: ...

    def check_caps(self) -> None:
        """`CapReached` when a cap has been passed, measured now (`Launcher.stopped(now=True)`, the disk walked):
        asked before an answer is accepted, so a write the disk poller has not seen yet still ends the run at
        the cap."""
        ...

    def set_network(self, policy: EgressPolicy) -> None: ...

    def blocked(self) -> dict[str, int]: ...

    def mcp_start(self, name: str, command: str, env: dict[str, str]) -> None: ...

    def mcp_io(self, name: str, line: str | None, wait: list[int], timeout: float) -> ServerLines: ...

    def mcp_stop(self, name: str) -> None: ...

    def close(self) -> None: ...
