"""`DECODE_POOL_SIZE` for `SANDBOX_MODE=docker`: containers started ahead, agentd running, the network off.

A docker sandbox's workspace is a bind mount, fixed when the container is
created. So a warm container is created on a slot of its own,
`DECODE_DATA_DIR/pool/<pid>-<random>/workspace` (its egress proxy's private
directory beside it), empty until a run claims it. The claim moves the run's
fresh workspace copy into the slot (one rename per top-level entry: the slot and
the run directory are both in the data directory) and takes over the container
and its agentd, started with no egress; the run's first `start` hands that agentd
over instead of a new `docker exec`. A slot serves one run and goes with its
container, so nothing of one run is seen by the next.

The pools are warm_pool.py's, keyed by what the container was created with
(image, cpus, memory, pids, disk cap, engine). A pooled container is at most
`warm_pool.IDLE_S` old when claimed: an image rebuilt under the same tag reaches
the pool within that time. Slots of a process that died are removed when the
next server starts (`remove_stale_slots`); their containers, and every other sandbox container a dead process
left (labelled `LABEL`), by `remove_leftovers`.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

from bot.core.errors import SandboxError
from bot.core.trees import remove_tree
from bot.sandbox import warm_pool
from bot.sandbox.egress_policy import EgressPolicy
from bot.sandbox.protocol import SandboxSpec

LABEL = "decode.sandbox"  # on every sandbox container, with `.pid` and `.host`: who made it, where


class WarmContainer:
    """One pooled sandbox: its launcher (a container on an empty slot), agentd already running in it."""

    def __init__(self, launcher: Any, transport: Any, slot: Path) -> None:
        self.launcher = launcher
        self.transport = transport
        self.slot = slot

    def poll(self) -> int | None:
        """None while agentd (and so the container) runs; its exit status once it stopped."""
        return self.transport.exited()

    def terminate(self) -> None:
        """Stop agentd, remove the container and the slot."""
        self.transport.close()
        self.launcher.close()
        remove_slot(self.slot)


def pool_of(launcher: Any, spec: SandboxSpec, docker: str, env: dict[str, str], *,
            pinned: bool = False) -> warm_pool.WarmPool:
    """The process-wide warm pool of `spec.pool_size` containers like `spec`'s, each a `launcher` (the docker
    launcher class) on a slot of its own, made with the `docker` CLI and its client `env`; filling."""
    pool_dir = spec.pool_dir
    assert pool_dir is not None
    key = ("docker", docker, tuple(sorted(env.items())), spec.image, spec.memory_mb, spec.cpus, spec.pids,
           spec.disk_mb, pool_dir)

    def warm() -> WarmContainer:
        slot = new_slot(pool_dir)
        try:
            made = launcher(replace(spec, workspace=slot / "workspace", name="pool", pool_size=0, ready=None),
                            docker=docker, client_env=env)
        except BaseException:
            remove_slot(slot)
            raise
        return WarmContainer(made, made.start(EgressPolicy()), slot)

    return warm_pool.pool_for(key, spec.pool_size, warm, pinned=pinned)


def new_slot(pool_dir: Path) -> Path:
    """A fresh slot directory under `pool_dir` (0700), with its empty `workspace`, named after this process."""
    pool_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    slot = pool_dir / f"{os.getpid()}-{secrets.token_hex(6)}"
    (slot / "workspace").mkdir(mode=0o700, parents=True)
    return slot


def move_into(workspace: Path, target: Path) -> None:
    """Move the run's workspace copy's entries into the claimed slot's `target` directory (their owner is the
    caller's to set)."""
    try:
        for entry in os.scandir(workspace):
            shutil.move(entry.path, target / entry.name)  # a rename on one file system
    except OSError as e:
        raise SandboxError(f"cannot move the workspace {workspace} into the warm sandbox's {target}: {e}") from None


def remove_slot(slot: Path) -> None:
    """Remove a slot and everything in it (the bot owns it, or is root)."""
    remove_tree(slot)


def remove_stale_slots(pool_dir: Path) -> list[Path]:
    """Remove the slots under `pool_dir` whose creating process is gone; returns them."""
    removed: list[Path] = []
    if not pool_dir.is_dir():
        return removed
    for slot in pool_dir.iterdir():
        pid = slot.name.partition("-")[0]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            remove_slot(slot)
            removed.append(slot)
    return removed


def leftovers(docker: str = "docker") -> list[str]:
    """Ids of every container this host's decode processes created that still exists."""
    res = subprocess.run([docker, "ps", "-aq", "--no-trunc", "--filter", f"label={LABEL}"],
                         capture_output=True, text=True)
    return res.stdout.split()


def remove_leftovers(docker: str = "docker") -> list[str]:
    """Remove sandbox containers made on this host whose creating process is gone; returns their ids."""
    removed = []
    fmt = '{{index .Config.Labels "%s.host"}} {{index .Config.Labels "%s.pid"}}' % (LABEL, LABEL)
    for cid in leftovers(docker):
        res = subprocess.run([docker, "inspect", "--format", fmt, cid], capture_output=True, text=True)
        host, _, pid = res.stdout.strip().partition(" ")
        if host == socket.gethostname() and pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            subprocess.run([docker, "rm", "-f", "-v", cid], capture_output=True)
            removed.append(cid)
    return removed
