"""Commands in the sandbox: `exec`, and the end of everything a command leaves behind.

A command runs in a process group of its own; when it ends (or times out), the
group is killed, and so is every other descendant, since agentd is the child
subreaper of what its commands leave behind (`setsid` and double forks included).
"""

from __future__ import annotations

import os
import select
import signal
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


BASH = "/bin/bash"
SERVER_PIDS: "set[int]" = set()  # MCP servers' processes (mcp.py): they and their children outlive each command
SERVER_EXITS: "dict[int, int | str]" = {}  # pid -> exit status of an MCP server `reap` collected (negative: the signal)


class Child:
    """A command `spawn` started: its pid, and its exit status once `poll` or `wait` collected it
    (negative: the signal that ended it)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self, flags: int = os.WNOHANG) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, flags)
            except ChildProcessError:  # reaped elsewhere
                self.returncode = -signal.SIGKILL
                return self.returncode
            if pid:
                self.returncode = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        return self.returncode

    def wait(self) -> int | None:
        return self.poll(0)


def spawn(root: str, command: str, env: dict) -> tuple:
    """bash -c `command` in `root`, in a session of its own, stdin from /dev/null, stdout and stderr into
    one pipe; the Child and the pipe's read end.

    posix_spawn (vfork, then exec) costs 0.1 ms less a command than subprocess.Popen. It takes no working
    directory, so agentd moves into `root` first (its own paths are all absolute). Every descriptor agentd
    opens is non-inheritable, and 0-2 are replaced, so none leaks into the command.
    """
    os.chdir(root)
    r, w = os.pipe()
    try:
        pid = os.posix_spawn(
            BASH, [BASH, "-c", command], env,
            file_actions=[(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                          (os.POSIX_SPAWN_DUP2, w, 1), (os.POSIX_SPAWN_DUP2, w, 2)],
            setsid=True, setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
        )
    except BaseException:
        os.close(r)
        raise
    finally:
        os.close(w)
    return Child(pid), r


def op_exec(ws: Workspace, req: dict) -> dict:
    """Run `command` with bash in the workspace; its capped output, exit code (None on timeout) and duration."""
    timeout = float(req.get("timeout") or 120)
    env = dict(os.environ)
    env.update(req.get("env") or {})
    started = time.monotonic()
    child, fd = spawn(ws.root, req["command"], env)
    out = OutputCap(int(req.get("cap") or 1024 * 1024))
    try:
        timed_out = collect(child, fd, out, started + timeout)
        kill_group(child.pid)
        child.wait()
        kill_group(child.pid, until_gone=True)
        kill_descendants()
        drain(fd, out)
    finally:
        os.close(fd)
    return {
        "exit_code": None if timed_out else child.returncode,
        "output": out.text(),
        "timed_out": timed_out,
        "dropped_bytes": out.dropped,
        "duration": time.monotonic() - started,
    }


def collect(child: Child, fd: int, out: OutputCap, deadline: float) -> bool:
    """Feed `child`'s output to `out` until it exits or `deadline` passes; True when it timed out."""
    exited_at = None
    while True:
        now = time.monotonic()
        if exited_at is None and child.poll() is not None:
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
                return not wait_exit(child, deadline)
            out.feed(chunk)


def wait_exit(child: Child, deadline: float) -> bool:
    """Wait for `child` to exit until `deadline`; True when it did.

    A pidfd wakes us the moment it exits (Linux 5.3+, Python 3.9+); before
    that, polling every millisecond.
    """
    if child.poll() is not None:
        return True
    try:
        pidfd = os.pidfd_open(child.pid)
    except (AttributeError, OSError):
        while child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.001)
        return child.returncode is not None
    try:
        select.select([pidfd], [], [], max(deadline - time.monotonic(), 0))
    finally:
        os.close(pidfd)
    return child.poll() is not None


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
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True
        if pid in SERVER_PIDS:
            SERVER_EXITS[pid] = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


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
        if SERVER_PIDS and only_servers_left():
            return
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


def only_servers_left() -> bool:
    """Whether agentd's only children are MCP servers (whose trees are spared), read from
    /proc/self/task/*/children without a scan of /proc; False where the kernel does not list children."""
    children: "set[int]" = set()
    try:
        for task in os.listdir("/proc/self/task"):
            with open("/proc/self/task/%s/children" % task) as f:
                children.update(int(pid) for pid in f.read().split())
    except (OSError, ValueError):
        return False
    return children <= SERVER_PIDS


def descendants(root: int) -> list:
    """The pids whose parent chain under /proc leads to `root` (processes only, not threads), but for the MCP
    servers' trees."""
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
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = [], [pid for pid in children.get(root, ()) if pid not in SERVER_PIDS]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def become_subreaper() -> None:
    """Make orphaned descendants children of agentd (Linux), so their zombies are reaped at once.

    Without it they go to the sandbox's pid 1, which on some hosts never reaps.
    """
    _prctl(36, 1)  # PR_SET_CHILD_SUBREAPER


def become_undumpable() -> None:
    """Make agentd undumpable: the commands it runs, under its own user, can then neither open its channel to
    the host through /proc/PID/fd (to forge answers or steal requests) nor attach to it. They are dumpable
    again once exec'd, so they can still debug each other."""
    _prctl(4, 0)  # PR_SET_DUMPABLE


def _prctl(option: int, value: int) -> None:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (ImportError, OSError, AttributeError):  # not Linux
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
