"""Per-sandbox cgroups: a pids, memory and cpu limit around one process tree.

Both layouts are handled: v1 (one hierarchy per controller, `/sys/fs/cgroup/pids`,
`/sys/fs/cgroup/memory`, ...) and v2 (one unified hierarchy whose root offers the
`pids` and `memory` controllers). A hybrid host whose v2 mount carries no
controllers is treated as v1. Creating a cgroup needs write access to the
hierarchy, which in practice means root. A non-root user can be given a delegated
v2 subtree instead (`DECODE_CGROUP_PARENT`, see action.yml): the sandboxes' cgroups
are then made directly under that directory. `SandboxCgroup.create` returns None
when neither is usable, and the caller refuses to start (there is no per-process
fallback: rlimits cap each process, not the sandbox).

The process is put into the cgroup by a tiny `sh` wrapper that writes its own pid
into `cgroup.procs` and then execs the real command, so nothing it starts is ever
outside the limits.
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import signal
import time
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
PREFIX = "decode-"
V2_PARENT = "decode.sandboxes"
CPU_PERIOD_US = 100_000


class SandboxCgroup:
    """One cgroup (a directory per v1 hierarchy, or one v2 directory) for one sandbox."""

    def __init__(self, dirs: list[Path], version: int) -> None:
        self.dirs = dirs
        self.version = version

    @classmethod
    def create(
        cls, name: str, *, memory_mb: int, pids: int, cpus: float | None = None, root: Path = CGROUP_ROOT,
        parent: Path | None = None,
    ) -> SandboxCgroup | None:
        """A fresh cgroup limited to `pids` tasks and `memory_mb` MiB, or None if the host has none usable.

        With `parent` (a delegated cgroup v2 directory), the cgroup is made under it and nowhere else.
        """
        leaf = "%s%s-%d-%s" % (PREFIX, re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:40], os.getpid(), secrets.token_hex(3))
        memory = memory_mb * 1024 * 1024
        if parent is not None:
            if _v2_controllers(parent) >= {"pids", "memory"}:
                return _create_v2(parent, leaf, memory, pids, cpus, delegated=True)
            return None
        if _v2_controllers(root) >= {"pids", "memory"}:
            return _create_v2(root, leaf, memory, pids, cpus)
        if (root / "pids" / "cgroup.procs").exists() and (root / "memory" / "cgroup.procs").exists():
            return _create_v1(root, leaf, memory, pids, cpus)
        return None

    @property
    def procs_files(self) -> list[Path]:
        """The `cgroup.procs` files a process writes its pid into to join."""
        return [d / "cgroup.procs" for d in self.dirs]

    def wrap(self, argv: list[str]) -> list[str]:
        """`argv` preceded by a shell that moves itself into this cgroup, then execs `argv`."""
        joins = " && ".join("echo $$ > %s" % shlex.quote(str(f)) for f in self.procs_files)
        return ["/bin/sh", "-c", joins + ' && exec "$@"', "sh", *argv]

    def pids(self) -> set[int]:
        """The processes currently in the cgroup."""
        found: set[int] = set()
        for f in self.procs_files:
            try:
                found.update(int(p) for p in f.read_text().split())
            except OSError:
                pass
        return found

    def oom_kills(self) -> int:
        """How many processes the kernel killed in this cgroup for passing its memory limit (v2 `memory.events`,
        v1 `memory.oom_control`; 0 where the kernel does not count them)."""
        for d in self.dirs:
            for name in ("memory.events", "memory.oom_control"):
                try:
                    text = (d / name).read_text()
                except OSError:
                    continue
                if "oom_kill " in text:
                    return oom_kill_count(text)
        return 0

    def kill(self, timeout: float = 5.0) -> None:
        """SIGKILL every process in the cgroup, repeatedly, until it is empty or `timeout` passes."""
        kill_file = self.dirs[0] / "cgroup.kill"
        deadline = time.monotonic() + timeout
        while True:
            remaining = self.pids()
            if not remaining or time.monotonic() > deadline:
                return
            if self.version == 2 and kill_file.exists():
                _write(kill_file, "1")
            for pid in remaining:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.02)

    def close(self) -> None:
        """Kill what is left and remove the cgroup. Safe to call twice."""
        self.kill()
        for d in self.dirs:
            _rmdir(d)
        self.dirs = [d for d in self.dirs if d.exists()]


def _create_v1(root: Path, leaf: str, memory: int, pids: int, cpus: float | None) -> SandboxCgroup | None:
    own = _own_paths()
    made: list[Path] = []
    try:
        for controller in ("pids", "memory", "cpu"):
            base = root / controller
            if not (base / "cgroup.procs").exists():
                continue  # cpu is optional; pids and memory were checked by the caller
            d = _mkdir_under(base, own.get(controller, "/"), leaf)
            if d is None:
                if controller == "cpu":
                    continue
                raise OSError("no writable %s hierarchy" % controller)
            made.append(d)
            if controller == "pids":
                _write(d / "pids.max", str(pids))
            elif controller == "memory":
                _write(d / "memory.limit_in_bytes", str(memory))
                if (d / "memory.memsw.limit_in_bytes").exists():
                    _write(d / "memory.memsw.limit_in_bytes", str(memory), optional=True)
            elif cpus:
                _write(d / "cpu.cfs_period_us", str(CPU_PERIOD_US), optional=True)
                _write(d / "cpu.cfs_quota_us", str(int(cpus * CPU_PERIOD_US)), optional=True)
    except OSError:
        for d in made:
            _rmdir(d)
        return None
    return SandboxCgroup(made, 1)


def _create_v2(
    root: Path, leaf: str, memory: int, pids: int, cpus: float | None, delegated: bool = False
) -> SandboxCgroup | None:
    """A leaf under `root/decode.sandboxes`, or right under `root` when it is a `delegated` subtree."""
    wanted = ["pids", "memory"] + (["cpu"] if cpus and "cpu" in _v2_controllers(root) else [])
    parent = root if delegated else root / V2_PARENT
    d = parent / leaf
    try:
        if not delegated:
            _enable(root, wanted)
        parent.mkdir(exist_ok=True)
        _sweep(parent)
        _enable(parent, wanted)
        d.mkdir()
        _write(d / "pids.max", str(pids))
        _write(d / "memory.max", str(memory))
        _write(d / "memory.swap.max", "0", optional=True)
        if "cpu" in wanted and cpus:
            _write(d / "cpu.max", "%d %d" % (int(cpus * CPU_PERIOD_US), CPU_PERIOD_US), optional=True)
    except OSError:
        _rmdir(d)
        return None
    return SandboxCgroup([d], 2)


def _v2_controllers(root: Path) -> set[str]:
    try:
        return set((root / "cgroup.controllers").read_text().split())
    except OSError:
        return set()


def _enable(group: Path, controllers: list[str]) -> None:
    active = set((group / "cgroup.subtree_control").read_text().split())
    missing = [c for c in controllers if c not in active]
    if missing:
        _write(group / "cgroup.subtree_control", " ".join("+" + c for c in missing))


def _own_paths() -> dict[str, str]:
    """This process's cgroup path per v1 controller, from /proc/self/cgroup."""
    paths: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return paths
    for line in lines:
        _, controllers, path = line.split(":", 2)
        for c in controllers.split(","):
            if c:
                paths[c] = path
    return paths


def _mkdir_under(base: Path, own: str, leaf: str) -> Path | None:
    """Make `leaf` below this process's own cgroup (so limits nest), else below the hierarchy root."""
    for parent in dict.fromkeys([base / own.lstrip("/"), base]):
        try:
            _sweep(parent)
            (parent / leaf).mkdir()
            return parent / leaf
        except OSError:
            continue
    return None


def _sweep(parent: Path) -> None:
    """Remove leftover sandbox cgroups whose creating process is gone and which are empty."""
    try:
        entries = list(parent.glob(PREFIX + "*"))
    except OSError:
        return
    for d in entries:
        m = re.search(r"-(\d+)-[0-9a-f]{6}$", d.name)
        if m and not _alive(int(m.group(1))):
            _rmdir(d, tries=1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _write(path: Path, value: str, optional: bool = False) -> None:
    try:
        with open(path, "w") as f:
            f.write(value)
    except OSError:
        if not optional:
            raise


def _rmdir(d: Path, tries: int = 50) -> None:
    for _ in range(tries):
        try:
            d.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)  # busy until the last killed task has been reaped


def oom_kill_count(text: str) -> int:
    """The `oom_kill N` count in a cgroup's `memory.events` (v2) or `memory.oom_control` (v1) text; the largest
    when several files were read together; 0 when none is there."""
    return max((int(n) for n in re.findall(r"^oom_kill (\d+)$", text, re.M)), default=0)
