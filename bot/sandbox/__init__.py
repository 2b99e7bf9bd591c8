"""The sandbox boundary: where every tool call of the agent runs.

`Sandbox` is what the agent loop and the pipeline see. Every backend starts the
same in-sandbox server (the `agentd` package, shipped as one zipapp by
`shipping.py`) and differs only in how: a `Launcher` per backend, picked by
name from `BACKENDS`. Adding a sandbox means adding one
module with a launcher and one row in that table. What a backend offers (GPU,
images, egress policy, pools, isolation) and what a host does for it at
start-up are asked here, of its launcher class, never of a backend by name.

The protocol itself is in `protocol.py`, which the backends import; this module
imports the backends, so the two never import each other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.config import SandboxSettings
from bot.core.errors import ConfigError
from bot.sandbox.bwrap import BwrapLauncher
from bot.sandbox.client import AgentdSandbox, close_all
from bot.sandbox.docker import DockerLauncher
from bot.sandbox.egress_policy import EgressPolicy
from bot.sandbox.local import LocalLauncher
from bot.sandbox.modal import ModalLauncher
from bot.sandbox.protocol import (
    Capabilities,
    CommandResult,
    HandBack,
    Launcher,
    Refused,
    Sandbox,
    SandboxSpec,
    Transport,
)

__all__ = [
    "BACKENDS", "ISOLATING", "Capabilities", "CommandResult", "EgressPolicy", "HandBack", "Launcher", "Refused",
    "Sandbox", "SandboxSpec", "Transport", "capabilities", "close_all", "offering", "open_sandbox", "preflight",
    "prepare_host",
    "sandbox_spec",
]

BACKENDS: dict[str, type[Launcher]] = {
    "local": LocalLauncher,
    "bwrap": BwrapLauncher,
    "docker": DockerLauncher,
    "modal": ModalLauncher,
}


def _launcher(mode: str) -> type[Launcher]:
    if mode not in BACKENDS:
        raise ConfigError(f"SANDBOX_MODE={mode!r} is not valid: set it to one of {', '.join(BACKENDS)}")
    return BACKENDS[mode]


def capabilities(mode: str) -> Capabilities:
    """What the `mode` backend offers, read off its launcher class (nothing is started)."""
    return _launcher(mode).capabilities


def offering(feature: str) -> tuple[str, ...]:
    """The backends whose `Capabilities` field `feature` is true, in table order (for messages)."""
    return tuple(mode for mode, launcher in BACKENDS.items() if getattr(launcher.capabilities, feature))


# The backends whose commands cannot reach the host's processes, files or secrets: the only ones
# that may run untrusted code such as a fork's (`local` is for trusted input only).
ISOLATING = offering("isolating")


def sandbox_spec(sandbox: SandboxSettings, workspace: Path, **fields: Any) -> SandboxSpec:
    """The sandbox of a run on `workspace` under `sandbox` settings (`fields` add the run's own: image, name,
    gpu). The server fills its warm pool from the same spec, so a run's sandbox matches the pool's."""
    base: dict[str, Any] = {"image": sandbox.image, "hide": sandbox.hide, "path": sandbox.path,
                            "cgroup_parent": sandbox.cgroup_parent, "disk_mb": sandbox.max_disk_mb,
                            "memory_mb": sandbox.max_memory_mb, "pool_size": sandbox.pool_size,
                            "pool_dir": sandbox.pool_dir}
    return SandboxSpec(workspace=workspace, **{**base, **fields})


def preflight(mode: str) -> None:
    """The `mode` backend's check before any work (every door calls it): a `ConfigError` naming the fix."""
    _launcher(mode).preflight()


def prepare_host(mode: str, spec: SandboxSpec) -> None:
    """The `mode` backend's start-up hook for a long-running host (docker: remove the containers of dead
    processes; modal: fill the warm pool), for sandboxes like `spec`'s."""
    _launcher(mode).prepare_host(spec)


def open_sandbox(mode: str, spec: SandboxSpec, *, network: EgressPolicy = EgressPolicy()) -> AgentdSandbox:
    """Start the `mode` backend on `spec`, reaching what `network` allows, and return a connected sandbox: the
    one way to open one (a backend with a warm pool hands out a pooled sandbox here; the setup cache restores
    into, and saves from, its `launcher`)."""
    launcher = _launcher(mode)(spec)
    try:
        if spec.ready is not None:
            spec.ready()
    except BaseException:
        launcher.close()
        raise
    return AgentdSandbox(launcher, mode=mode, network=network)
