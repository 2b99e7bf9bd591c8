"""A process-wide warm pool of Modal sandboxes, one queue per kind of sandbox.

A pooled sandbox is app-agnostic: created from the image with the network
setting and resources asked for, but no workspace. A launcher claims one and
makes it repo-specific by uploading the workspace; each claim starts a refill
in the background. Pools are created on first use, keyed by everything that
`Sandbox.create` is given (image, network, cpu, memory, gpu, allow-list), and
every sandbox still waiting in them is terminated at interpreter exit.
"""

from __future__ import annotations

import atexit
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Any

IDLE_S = 600.0  # a pooled sandbox older than this is terminated rather than claimed


class WarmPool:
    """Keeps `size` sandboxes made by `create` ready; `claim` takes one without waiting."""

    def __init__(self, create: Callable[[], Any], size: int, *, idle_s: float = IDLE_S) -> None:
        self.size = size
        self.last_error: str | None = None
        self._create = create
        self._idle_s = idle_s
        self._ready: deque[tuple[float, Any]] = deque()
        self._lock = threading.Lock()
        self._filling: threading.Thread | None = None
        self._closed = False

    def claim(self) -> Any | None:
        """A live pooled sandbox, or None when none is ready (the caller then creates one itself)."""
        found = None
        stale = []
        with self._lock:
            while self._ready and found is None:
                born, sandbox = self._ready.popleft()
                if time.monotonic() - born > self._idle_s or _dead(sandbox):
                    stale.append(sandbox)
                else:
                    found = sandbox
        for sandbox in stale:
            _terminate(sandbox)
        self.refill()
        return found

    def ready(self) -> int:
        """How many sandboxes wait in the pool now."""
        with self._lock:
            return len(self._ready)

    def refill(self) -> None:
        """Top the pool up to `size` in a background thread (one at a time)."""
        with self._lock:
            if self._closed or (self._filling is not None and self._filling.is_alive()):
                return
            self._filling = threading.Thread(target=self._fill, name="modal-pool-refill", daemon=True)
            self._filling.start()

    def wait_full(self, timeout: float) -> bool:
        """Block until the pool holds `size` sandboxes or `timeout` passes; True when full."""
        deadline = time.monotonic() + timeout
        while self.ready() < self.size and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.ready() >= self.size

    def _fill(self) -> None:
        while True:
            with self._lock:
                if self._closed or len(self._ready) >= self.size:
                    return
            try:
                sandbox = self._create()
            except Exception as e:  # the next claim creates cold; the error is kept for diagnostics
                self.last_error = str(e)
                return
            with self._lock:
                keep = not self._closed
                if keep:
                    self._ready.append((time.monotonic(), sandbox))
            if not keep:
                _terminate(sandbox)
                return

    def close(self) -> None:
        """Terminate every waiting sandbox and stop refilling."""
        with self._lock:
            self._closed = True
            waiting = [sandbox for _, sandbox in self._ready]
            self._ready.clear()
            filling = self._filling
        if filling is not None:
            filling.join(timeout=30)
        for sandbox in waiting:
            _terminate(sandbox)


_pools: dict[Hashable, WarmPool] = {}
_registry_lock = threading.Lock()


def pool_for(key: Hashable, size: int, create: Callable[[], Any]) -> WarmPool:
    """The process-wide pool for `key`, created (and filling) on first use."""
    with _registry_lock:
        pool = _pools.get(key)
        if pool is None:
            if not _pools:
                atexit.register(close_all)
            pool = _pools[key] = WarmPool(create, size)
    pool.refill()
    return pool


def close_all() -> None:
    """Terminate every pooled sandbox of this process (registered with atexit)."""
    with _registry_lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool.close()


def _dead(sandbox: Any) -> bool:
    try:
        return sandbox.poll() is not None
    except Exception:
        return True


def _terminate(sandbox: Any) -> None:
    try:
        sandbox.terminate()
    except Exception:
        pass
