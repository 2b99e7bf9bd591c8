"""`SANDBOX_MODE=local`: agentd as a plain child process, no isolation.

For trusted input only, even on a disposable machine such as an Actions runner
(whose step holds the API key and the token). The agent can do whatever
the bot's user can. Its toolchain is the host's PATH without decode-bot's
virtualenv, and what setup installs goes where that user's pip and npm put it
(into the per-run HOME when the interpreter's site-packages is not writable).
agentd starts with a clean environment, and the harness marks itself
non-dumpable so that a process of the same (non-root) user cannot read its
/proc/PID/environ; a root agent still can. Tool output is redacted
before the model sees it, so known secrets do not reach the model or the
transcript, but only the bwrap and docker backends keep them out of reach.

No egress policy can be enforced either: the agent uses the host's network as
it is, whatever `.github/decode.yml` says, and `blocked()` is always empty. Of the limits, only the disk
cap (DECODE_MAX_DISK_MB, `disk.DiskGuard` on the workspace and HOME) applies: past it, agentd and every
process under it are killed, as the isolating backends kill their sandbox.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import tempfile
from contextlib import suppress
from pathlib import Path
from typing import ClassVar

from bot.core.trees import remove_tree
from bot.sandbox.agentd.processes import BASH
from bot.sandbox.client import ProcessTransport
from bot.sandbox.disk import DiskGuard
from bot.sandbox.egress_policy import EgressPolicy
from bot.sandbox.protocol import Cap, Capabilities, Death, SandboxSpec, stopped_from_outside
from bot.sandbox.shipping import agentd_file

SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def clean_env(home: str, mode: str, path: str = SAFE_PATH) -> dict[str, str]:
    """The only environment a sandboxed process gets: no variable of the host's.

    `path` is the toolchain the agent uses; `$HOME/.local/bin` goes before it, and `$HOME/.local`
    is where setup's installs land: pip falls back to a user install there when the interpreter's
    site-packages is not writable (PIP_BREAK_SYSTEM_PACKAGES: Debian's PEP 668 marker would refuse
    it), and `npm install -g` uses it as its prefix. PIP_USER is not set: it would break
    `pip install` in a virtualenv that setup creates. SHELL names the shell agentd runs every command
    with; bash looks the user's login shell up in the passwd database when it is unset, a dozen system
    calls on each command's start.
    """
    local = home.rstrip("/") + "/.local"
    return {
        "PATH": os.pathsep.join(dict.fromkeys([local + "/bin", *path.split(os.pathsep)])),
        "HOME": home,
        "SHELL": BASH,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
        "PAGER": "cat",
        "GIT_PAGER": "cat",
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PIP_BREAK_SYSTEM_PACKAGES": "1",
        "NPM_CONFIG_PREFIX": local,
        "DECODE_SANDBOX": mode,
    }


def harness_bin() -> str | None:
    """The bin directory of the virtualenv decode-bot runs from (resolved), or None outside one.

    It is never on a sandbox's PATH: the agent's `python3` and `pip` are the host's (or the
    image's), not the harness's. agentd does not need it, being started by `sys.executable`.
    """
    if sys.prefix == sys.base_prefix:
        return None  # a system interpreter: its directory (/usr/bin) is the host's toolchain too
    return os.path.realpath(os.path.join(sys.prefix, "bin"))


def host_path(path: str | None = None) -> str:
    """The host's PATH (`path`, default $PATH) minus decode-bot's virtualenv and relative entries."""
    own = harness_bin()
    entries = (path if path is not None else os.environ.get("PATH", SAFE_PATH)).split(os.pathsep)
    kept = [e for e in entries if os.path.isabs(e) and os.path.realpath(e) != own]
    return os.pathsep.join(dict.fromkeys(kept)) or SAFE_PATH


class LocalTransport(ProcessTransport):
    """agentd's channel, whose close first ends the commands agentd runs: agentd ends them itself once its
    input ends, but only between two requests, and a call abandoned to an interrupt may run for minutes. (The
    isolating backends end the whole sandbox: its cgroup, its container.)"""

    def close(self) -> None:
        if self.exited() is None:  # a reaped agentd's pid may be another process's by now
            kill_tree(self.pid, spare_root=True)
        super().close()


class LocalLauncher:
    """Starts agentd on the host, in the workspace, with a clean environment."""

    capabilities: ClassVar[Capabilities] = Capabilities(
        isolating=False, egress_policy=False, image=False, gpu=False, pool=False)

    @classmethod
    def prepare_host(cls, spec: SandboxSpec) -> None:
        """Nothing to prepare: no sandbox outlives its process."""

    @classmethod
    def preflight(cls) -> None:
        """Nothing to check: agentd runs on the host."""

    def __init__(self, spec: SandboxSpec) -> None:
        self.root = str(spec.workspace.resolve())
        make_undumpable()
        self._home = tempfile.mkdtemp(prefix="decode-home-")
        self._transport: ProcessTransport | None = None
        self.disk = DiskGuard.of((Path(self.root), Path(self._home)), spec, self._kill_all)

    def start(self, policy: EgressPolicy) -> ProcessTransport:
        """Start agentd; `policy` cannot be enforced here (the host's network is the agent's)."""
        self.disk.check()
        argv = [sys.executable, "-I", str(agentd_file()), self.root]
        self._transport = LocalTransport(argv, clean_env(self._home, "local", host_path()))
        return self._transport

    def death(self) -> Death:
        """How agentd's process ended (no limit is enforced here, so never out of memory by the sandbox's)."""
        if self._transport is None or not self._transport.ended:
            return Death("a process of agentd's was killed")
        return stopped_from_outside(self._transport.wait_exit(), "agentd")

    def stopped(self, now: bool = False, disk: bool = True) -> Cap | None:
        """The disk cap once agentd was stopped for passing it (`now` and `disk`: measured first). No memory cap:
        nothing here limits memory (DECODE_MAX_MEMORY_MB is the isolating backends')."""
        return self.disk.measure() if now and disk else self.disk.exceeded

    def blocked(self) -> dict[str, int]:
        return {}

    def _kill_all(self) -> None:
        """Kill agentd and every process under it (the disk cap): its commands run in sessions of their own."""
        if self._transport is not None and self._transport.exited() is None:
            kill_tree(self._transport.pid)

    def close(self) -> None:
        self.disk.close()
        remove_tree(self._home)


def kill_tree(root: int, *, spare_root: bool = False) -> None:
    """SIGKILL `root` (unless `spare_root`) and every process under it, parents first."""
    for pid in descendants(root)[1 if spare_root else 0:]:
        with suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def descendants(root: int) -> list[int]:
    """`root` and every process under it, parents first (read from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with suppress(OSError, IndexError, ValueError):
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry.name))
    found, stack = [], [root]
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, ()))
    return found


def make_undumpable() -> None:
    """prctl(PR_SET_DUMPABLE, 0): other processes of our uid lose access to our /proc files."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # 4 = PR_SET_DUMPABLE
    except (OSError, AttributeError):
        pass  # not Linux: nothing to protect this way
