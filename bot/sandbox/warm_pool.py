"""A process-wide warm pool of sandboxes, one queue per kind of sandbox (`DECODE_POOL_SIZE` each).

A pooled sandbox is repository-agnostic: started from the image with the
resources asked for, but no workspace. A launcher claims one and makes it the
run's (modal: uploads the workspace; docker: moves it into the container's
mounted slot). Pools are created on first use, keyed by everything the sandbox
was started with (image, network, cpu, memory, gpu, allow-list), and every
sandbox still waiting in them is terminated at interpreter exit. What is pooled
only needs `poll()` (None while alive) and `terminate()`.

Each pool has one keeper thread: it tops the pool up after every claim, and
every `idle_s / 4` it replaces the sandboxes that have waited `idle_s * 3/4`
(so a claim finds a fresh one even after a quiet night, and an image rebuilt
under the same tag reaches the pool within `idle_s`) or died. A pool nobody
claimed from for `KEEP_S` closes itself, unless it is pinned (the one a server
fills at start): a setup cache entry's image gets a pool on its first use, and
that pool goes when the entry is no longer used. A creation that fails is kept
in `last_error` and tried again at the next round; claims meanwhile start cold.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Any

log = logging.getLogger("decode.pool")

IDLE_S = 600.0  # a pooled sandbox older than this is terminated rather than claimed
KEEP_S = 3600.0  # an unpinned pool not claimed from for this long is closed


class WarmPool:
    """Keeps `size` sandboxes made by `create` ready; `claim` takes one without waiting."""

    def __init__(self, create: Callable[[], Any], size: int, *, idle_s: float = IDLE_S, keep_s: float = KEEP_S,
                 pinned: bool = False, on_closed: Callable[["WarmPool"], None] | None = None) -> None:
        self.size = size
        self.pinned = pinned
        self.last_error: str | None = None
        self._create = create
        self._idle_s = idle_s
        self._keep_s = keep_s
        self._on_closed = on_closed
        self._ready: deque[tuple[float, Any]] = deque()
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._keeper: threading.Thread | None = None
        self._closed = False
        self._last_claim = time.monotonic()

    def claim(self) -> Any | None:
        """A live pooled sandbox, or None when none is ready (the caller then creates one itself)."""
        found = None
        stale = []
        with self._lock:
            self._last_claim = time.monotonic()
            while self._ready and found is None:
                born, sandbox = self._ready.popleft()
                if time.monotonic() - born > self._idle_s or _dead(sandbox):
                    stale.append(sandbox)
                else:
                    found = sandbox
            self._wake.notify_all()
        for sandbox in stale:
            _terminate(sandbox)
        self.refill()
        return found

    @property
    def closed(self) -> bool:
        """True once `close` ran (by a caller, or by the keeper for a pool nobody wants)."""
        return self._closed

    def ready(self) -> int:
        """How many sandboxes wait in the pool now."""
        with self._lock:
            return len(self._ready)

    def refill(self) -> None:
        """Make sure the keeper thread runs (it tops the pool up to `size`)."""
        with self._lock:
            if self._closed or (self._keeper is not None and self._keeper.is_alive()):
                self._wake.notify_all()
                return
            self._keeper = threading.Thread(target=self._keep, name="warm-pool", daemon=True)
            self._keeper.start()

    def wait_full(self, timeout: float) -> bool:
        """Block until the pool holds `size` sandboxes or `timeout` passes; True when full."""
        deadline = time.monotonic() + timeout
        while self.ready() < self.size and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.ready() >= self.size

    def _keep(self) -> None:
        """The keeper: top up, recycle the old and the dead, close an unwanted pool (see the module docstring)."""
        round_s = self._idle_s / 4
        while True:
            with self._lock:
                if self._closed:
                    return
                now = time.monotonic()
                unwanted = not self.pinned and now - self._last_claim > self._keep_s
                stale = [entry for entry in self._ready if now - entry[0] > self._idle_s * 3 / 4 or _dead(entry[1])]
                for entry in stale:
                    self._ready.remove(entry)
                missing = 0 if unwanted else self.size - len(self._ready)
            for _, sandbox in stale:
                _terminate(sandbox)
            if unwanted:
                self.close()
                return
            failed = False
            for _ in range(max(0, missing)):
                try:
                    sandbox = self._create()
                except Exception as e:  # noqa: BLE001 - claims start cold meanwhile; tried again next round
                    if self.last_error is None:
                        log.warning("could not start a warm sandbox (%s); runs start cold meanwhile", e)
                    self.last_error = str(e)
                    failed = True
                    break
                with self._lock:
                    keep = not self._closed
                    if keep:
                        self._ready.append((time.monotonic(), sandbox))
                        self.last_error = None
                if not keep:
                    _terminate(sandbox)
                    return
            with self._lock:
                if not self._closed and (failed or len(self._ready) >= self.size):
                    self._wake.wait(round_s)

    def close(self) -> None:
        """Terminate every waiting sandbox and stop the keeper."""
        with self._lock:
            self._closed = True
            waiting = [sandbox for _, sandbox in self._ready]
            self._ready.clear()
            keeper = self._keeper
            self._wake.notify_all()
        if keeper is not None and keeper is not threading.current_thread():
            keeper.join(timeout=30)
        for sandbox in waiting:
            _terminate(sandbox)
        if self._on_closed is not None:
            self._on_closed(self)


_pools: dict[Hashable, WarmPool] = {}
_registry_lock = threading.Lock()


def pool_for(key: Hashable, size: int, create: Callable[[], Any], *, pinned: bool = False) -> WarmPool:
    """The process-wide pool for `key`, created (and filling) on first use; `pinned` keeps it however long
    nobody claims from it (a server's start-up pool)."""
    with _registry_lock:
        pool = _pools.get(key)
        if pool is None:
            if not _pools:
                atexit.register(close_all)
            pool = _pools[key] = WarmPool(create, size, pinned=pinned, on_closed=lambda p: _forget(key, p))
        pool.pinned = pool.pinned or pinned
    pool.refill()
    return pool


def _forget(key: Hashable, pool: WarmPool) -> None:
    with _registry_lock:
        if _pools.get(key) is pool:
            del _pools[key]


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
