"""The sandbox boundary: where every tool call of the agent runs.

`Sandbox` is what the agent loop and the pipeline see. Every backend starts the
same in-sandbox server (`agentd.py`) and differs only in how: a `Launcher` per
backend, picked by name from `BACKENDS`. Adding a sandbox means adding one
module with a launcher and one row in that table.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from bot.errors import ConfigError
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
class HandBack:
    """The agent's changes as a binary patch, and what the sandbox left out of it (path -> why)."""

    patch: bytes
    left_out: dict[str, str]


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
    gpu: str | None = None  # e.g. "H200:4"; only the modal backend offers GPUs
    lifetime_s: int = 3 * 3600  # modal: the sandbox is terminated after this long, whatever happens
    cgroup_parent: Path | None = None  # bwrap: a delegated cgroup v2 directory to make the sandbox's cgroup in
    disk_mb: int = 10240  # what the agent may write: workspace plus temp (bwrap, docker; see disk.py)


class Transport(Protocol):
    """A line-oriented duplex channel to a running agentd."""

    def send(self, line: bytes) -> None: ...

    def recv(self, timeout: float) -> bytes | None: ...

    def close(self) -> None: ...

    def diagnostics(self) -> str: ...


class Launcher(Protocol):
    """One backend: starts agentd for a workspace, reaching what an `EgressPolicy` allows."""

    root: str  # the workspace's path as seen inside the sandbox

    def start(self, policy: EgressPolicy) -> Transport: ...

    def blocked(self) -> dict[str, int]: ...

    def close(self) -> None: ...


class Sandbox(Protocol):
    """The agent's view of the workspace. Paths are relative to `root`."""

    root: str
    mode: str

    def run(self, command: str, *, timeout: float = 120.0) -> CommandResult: ...

    def read_file(self, path: str) -> bytes: ...

    def write_file(self, path: str, data: bytes) -> None: ...

    def glob(self, pattern: str, path: str = ".") -> list[str]: ...

    def grep(self, pattern: str, path: str = ".", glob: str | None = None) -> list[str]: ...

    def export_patch(self, base: str) -> bytes: ...

    def hand_back(self, base: str, *, max_file_bytes: int | None = None,
                  max_bytes: int | None = None) -> HandBack: ...

    def check_hand_back(self, base: str, *, max_file_bytes: int | None = None) -> dict[str, str]: ...

    def set_network(self, policy: EgressPolicy) -> None: ...

    def blocked(self) -> dict[str, int]: ...

    def close(self) -> None: ...


BACKENDS: dict[str, str] = {
    "local": "bot.sandbox.local:LocalLauncher",
    "bwrap": "bot.sandbox.bwrap:BwrapLauncher",
    "docker": "bot.sandbox.docker:DockerLauncher",
    "modal": "bot.sandbox.modal:ModalLauncher",
}
# The backends whose commands cannot reach the host's processes, files or secrets: the only ones
# that may run untrusted code such as a fork's (`local` is for trusted input only).
ISOLATING = ("bwrap", "docker", "modal")


def open_sandbox(mode: str, spec: SandboxSpec, *, network: EgressPolicy = EgressPolicy()) -> Sandbox:
    """Start the `mode` backend on `spec`, reaching what `network` allows, and return a connected sandbox."""
    from bot.sandbox.client import AgentdSandbox

    if mode not in BACKENDS:
        raise ConfigError(f"SANDBOX_MODE={mode!r} is not valid: set it to one of {', '.join(BACKENDS)}")
    module_name, _, class_name = BACKENDS[mode].partition(":")
    try:
        launcher_class = getattr(importlib.import_module(module_name), class_name)
    except ImportError as e:
        raise ConfigError(f"SANDBOX_MODE={mode} is not available in this build: {e}") from None
    return AgentdSandbox(launcher_class(spec), mode=mode, network=network)
