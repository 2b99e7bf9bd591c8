"""Commands in the sandbox: `exec`, and the end of everything a command leaves behind.

A command runs in a process group of its own; when it ends (or times out), the
group is killed, and so is every other descendant, since agentd is the child
subreaper of what its commands leave behind (`setsid` and double forks included).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time

from .paths import Workspace


class OutputCap:
    """Keeps the first and last `cap // 2` bytes of a stream and counts the rest."""

    def __init__(self, cap: int) -> None:
        self.half = max(cap // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def feed(self, chunk: bytes) -> None:
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            excess = len(self.tail) - self.half
            if excess > 0:
                del self.tail[:excess]
                self.dropped += excess

    def text(self) -> str:
        out = bytes(self.head)
        if self.dropped:
            out += b"\n[... %d bytes dropped by the sandbox ...]\n" % self.dropped
        return (out + bytes(self.tail)).decode("utf-8", "replace")


def op_exec(ws: Workspace, req: dict) -> dict:
    """Run `command` with bash in the workspace; its capped output, exit code (None on timeout) and duration."""
    timeout = float(req.get("timeout") or 120)
    env = dict(os.environ)
    env.update(req.get("env") or {})
    started = time.monotonic()
    proc = subprocess.Popen(
        ["/bin/bash", "-c", req["command"]],
        cwd=ws.root,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env=env,
    )
    out = OutputCap(int(req.get("cap") or 1024 * 1024))
    fd = proc.stdout.fileno()
    timed_out = collect(proc, fd, out, started + timeout)
    kill_group(proc.pid)
    proc.wait()
    kill_group(proc.pid, until_gone=True)
    kill_descendants()
    drain(fd, out)
    proc.stdout.close()
    return {
        "exit_code": None if timed_out else proc.returncode,
        "output": out.text(),
        "timed_out": timed_out,
        "dropped_bytes": out.dropped,
        "duration": time.monotonic() - started,
    }


def collect(proc: subprocess.Popen, fd: int, out: OutputCap, deadline: float) -> bool:
    """Feed `proc`'s output to `out` until it exits or `deadline` passes; True when it timed out."""
    exited_at = None
    while True:
        now = time.monotonic()
        if exited_at is None and proc.poll() is not None:
            exited_at = now
        if exited_at is not None and now - exited_at > 0.2:
            return False  # background children keep the pipe open; stop waiting for them
        if now >= deadline:
            return True
        wait = min(deadline - now, 0.05 if exited_at else 1.0)
        ready, _, _ = select.select([fd], [], [], wait)
        if ready:
            chunk = os.read(fd, 65536)
            if not chunk:  # the pipe closed; the command may not be reaped yet
                return not wait_exit(proc, deadline)
            out.feed(chunk)


def wait_exit(proc: subprocess.Popen, deadline: float) -> bool:
    """Wait for `proc` to exit until `deadline`; True when it did.

    A pidfd wakes us the moment it exits (Linux 5.3+, Python 3.9+);
    `Popen.wait(timeout)` polls with sleeps and would add a millisecond to
    every command.
    """
    if proc.poll() is not None:
        return True
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0))
            return True
        except subprocess.TimeoutExpired:
            return False
    try:
        select.select([pidfd], [], [], max(deadline - time.monotonic(), 0))
    finally:
        os.close(pidfd)
    return proc.poll() is not None


def kill_group(pgid: int, until_gone: bool = False) -> None:
    """SIGKILL the process group; with `until_gone`, repeat until it is empty.

    One signal can miss a child forked while it is delivered (a fork bomb), so
    the second call keeps killing and reaping (agentd is the subreaper of what
    its commands leave behind) until no member is left or two seconds pass.
    Only call it with `until_gone` after the command's own process was waited
    for, since reaping takes any child.
    """
    deadline = time.monotonic() + 2.0
    while True:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return
        if not until_gone or time.monotonic() > deadline:
            return
        reap()
        time.sleep(0.001)


def reap() -> bool:
    """Collect every exited orphan that was re-parented to agentd; True while children remain."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True


def kill_descendants(timeout: float = 2.0) -> None:
    """SIGKILL every process agentd's commands left behind, until none is left, and reap them.

    A process group is not enough: a command can leave its group (`setsid`,
    a double fork) and outlive its call. agentd is a child subreaper, so every
    living descendant has an ancestor chain that ends at one of agentd's
    children; when agentd has no child left, it has no descendant left, and a
    command that left nothing behind costs one `waitpid`. Otherwise the ppid
    chains under /proc name them all; killing repeats, since a process can fork
    between the scan and its signal, and its orphans come back to agentd.
    """
    deadline = time.monotonic() + timeout
    me = os.getpid()
    while reap():
        delivered = False
        for pid in descendants(me):
            try:
                os.kill(pid, signal.SIGKILL)
                delivered = True
            except OSError:  # gone already, or not ours to kill (a setuid program)
                pass
        if not delivered or time.monotonic() > deadline:
            return
        time.sleep(0.001)


def descendants(root: int) -> list:
    """The pids whose parent chain under /proc leads to `root` (processes only, not threads)."""
    parents = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fd = os.open("/proc/%s/stat" % name, os.O_RDONLY)
            try:
                stat = os.read(fd, 1024)
            finally:
                os.close(fd)
            parents[int(name)] = int(stat[stat.rindex(b")") + 2:].split(None, 2)[1])
        except (OSError, ValueError):
            continue  # exited while we looked
    children = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = [], list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def become_subreaper() -> None:
    """Make orphaned descendants children of agentd (Linux), so their zombies are reaped at once.

    Without it they go to the sandbox's pid 1, which on some hosts never reaps.
    """
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (ImportError, OSError, AttributeError):
        pass


def drain(fd: int, out: OutputCap) -> None:
    """Feed what is already waiting in the pipe `fd` to `out`, without blocking."""
    while True:
        ready, _, _ = select.select([fd], [], [], 0)
        if not ready:
            return
        chunk = os.read(fd, 65536)
        if not chunk:
            return
        out.feed(chunk)
