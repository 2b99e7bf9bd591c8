"""The egress proxy's `close()` when its accept thread is late: close() waits 5 s for it, then returns; the
descriptors the thread polls must stay its own until it wakes, or it polls numbers reused elsewhere (and
blocks on them for good). The thread is held by a tracer process (ptrace: PTRACE_SEIZE and PTRACE_INTERRUPT
of that one thread), as a loaded machine might hold it; nothing of ours is patched."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from bot.sandbox.egress import EgressProxy

HOLD = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = (ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p)
tid = int(sys.argv[1])
if libc.ptrace(0x4206, tid, None, None) != 0:  # PTRACE_SEIZE
    print("refused", os.strerror(ctypes.get_errno()), flush=True)
    sys.exit(0)
libc.ptrace(0x4207, tid, None, None)  # PTRACE_INTERRUPT: this thread stops, the others go on
os.waitpid(tid, 0x40000000)  # __WALL: until it has stopped
print("held", flush=True)
sys.stdin.readline()  # the tracer's exit lets the thread go on
"""


def test_close_leaves_a_late_accept_thread_its_descriptors_and_it_ends_when_it_wakes(tmp_path: Path) -> None:
    before = set(threading.enumerate())
    proxy = EgressProxy(tmp_path / "proxy.sock")
    [accept] = [t for t in threading.enumerate() if t not in before and t.name == "egress-proxy"]
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(accept.native_id)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdin is not None
    said = holder.stdout.readline().strip()
    if said != "held":
        holder.kill()
        holder.wait()
        proxy.close()
        pytest.skip(f"this machine does not let a process trace a thread ({said or 'no answer'})")
    reused: list[tuple[int, int]] = []
    try:
        proxy.close()  # returns after its 5 s wait, the accept thread still held
        assert accept.is_alive()
        reused = [os.pipe() for _ in range(4)]  # the lowest free numbers: whatever close() just freed
    finally:
        holder.stdin.close()
        holder.wait()
    accept.join(timeout=5)
    try:
        assert not accept.is_alive(), "woken, the accept thread ends; it does not poll someone else's descriptors"
        assert not (tmp_path / "proxy.sock").exists()
    finally:
        for r, w in reused:
            os.close(r)
            os.close(w)
