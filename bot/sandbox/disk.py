"""A cap on what the agent writes: the bytes under the sandbox's writable host paths.

Why polling and not a file-system quota: a quota needs the workspace on its own
file system (a loop-mounted ext4 image per run, or XFS project quotas on the data
dir), which needs root and a prepared host, while the bwrap backend must also run
as the Actions runner's user. So a thread measures the workspace and the
sandbox's temp directory every `interval` seconds (less often when a walk is slow)
and, past the cap, kills every process of the sandbox and records why; the
launcher refuses to restart it, the agent stops at once (`CapReached`), and the work so far is handed
back from a sandbox opened for that alone, without the poller, and committed as incomplete (exit 3).
The bound is therefore soft: a writer can overshoot by what it writes in one interval (about 0.5 s of
disk bandwidth) before it is killed. The loop measures once more before it accepts an answer (`measure`,
through `Sandbox.check_caps`), so a write the poller has not seen yet still ends the run at the cap, never as
done. The docker backend's /tmp and /var/tmp are host directories beside the workspace, polled with it.

Given the sandbox's count of out-of-memory kills (`oom_kills`: bwrap's cgroup, a file read), the same poll
ends the memory cap the same way: a kill counted there stops the sandbox (`memory_cap`). Docker's count is
read inside the container, too dear to poll: its launcher asks when a command fails, when agentd's channel
ends and before an answer is accepted (bot/sandbox/docker.py).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from bot.sandbox.protocol import Cap, CapReached, SandboxSpec, memory_cap

INTERVAL_S = 0.5


def usage(paths: Iterable[Path]) -> int:
    """Bytes allocated under `paths` (hard links counted once, symlinks not followed)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    stack = [str(p) for p in paths]
    while stack:
        top = stack.pop()
        try:
            entries = list(os.scandir(top))
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
    return total


class DiskGuard:
    """Polls the bytes under `paths` and calls `kill` once they pass `limit_mb` MiB (None: no polling), or once
    `oom_kills` (when given) counts an out-of-memory kill in a sandbox of `memory_mb`."""

    def __init__(self, paths: Iterable[Path], limit_mb: int | None, kill: Callable[[], object],
                 interval: float = INTERVAL_S, *, oom_kills: Callable[[], int] | None = None,
                 memory_mb: int = 0) -> None:
        self.paths = tuple(paths)
        self.limit = (limit_mb or 0) * 1024 * 1024
        self.exceeded: Cap | None = None
        self._kill = kill
        self._oom_kills, self._memory_mb = oom_kills, memory_mb
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="decode-disk-guard", daemon=True)
        if limit_mb is not None:
            self._thread.start()

    @classmethod
    def of(cls, paths: Iterable[Path], spec: SandboxSpec, kill: Callable[[], object],
           oom_kills: Callable[[], int] | None = None) -> "DiskGuard":
        """The guard of a sandbox on `spec`: `spec.disk_mb` (and `spec.memory_mb`, given `oom_kills`), or none for
        a sandbox opened only to hand the work back after a cap stopped the agent (`spec.hand_back_only`: it runs
        none of the agent's commands)."""
        return cls(paths, None if spec.hand_back_only else spec.disk_mb, kill, oom_kills=oom_kills,
                   memory_mb=spec.memory_mb)

    def _watch(self) -> None:
        pause = self._interval
        while not self._stop.wait(pause):
            began = time.monotonic()
            if self.measure():
                return
            pause = max(self._interval, 4 * (time.monotonic() - began))  # a huge tree: at most 20% of a core

    def measure(self, disk: bool = True) -> Cap | None:
        """Measure now (a guard that polls: else nothing to measure): the out-of-memory kills, then the disk
        (`disk`: False skips the walk, the dear half); past a cap, kill the sandbox once and record why. The cap,
        once passed."""
        if not self.limit or self.exceeded is not None:
            return self.exceeded
        if self._oom_kills is not None and self._oom_kills():
            self.exceeded = memory_cap(self._memory_mb)
        elif disk and (used := usage(self.paths)) > self.limit:
            self.exceeded = Cap("max_disk", f"the agent wrote more than the disk cap (DECODE_MAX_DISK_MB="
                                            f"{self.limit // (1024 * 1024)}, workspace and temp held "
                                            f"{used // (1024 * 1024)} MiB): the sandbox was stopped")
        if self.exceeded is not None:
            self._kill()
        return self.exceeded

    def check(self) -> None:
        """`CapReached` once the cap has been passed (a stopped sandbox does not start again)."""
        if self.exceeded:
            raise CapReached(self.exceeded)

    def close(self) -> None:
        """Stop polling."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
