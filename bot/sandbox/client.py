"""The host side of agentd: a `Sandbox` that forwards every call as one JSON line.

The same client serves every backend; backends only differ in the `Launcher`
that starts agentd and hands back a `Transport`.
"""

from __future__ import annotations

import base64
import itertools
import json
import select
import socket
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from typing import NoReturn

from bot.core.errors import Cancelled, SandboxError
from bot.sandbox.egress_policy import EgressPolicy
from bot.sandbox.protocol import (ANSWER_CAP, CapReached, CommandResult, Death, HandBack, Launcher, QueuedLines,
                                  Refused, SandboxDied, ServerLines, Transport)

OUTPUT_CAP = 1024 * 1024  # bytes of command output kept by agentd (head + tail)
GRACE_S = 30.0  # how long past a command's own timeout we wait for agentd's answer
MB = 1024 * 1024
EXPORT_CHUNK = 4 * MB  # bytes of patch per export_read answer
CONNECT_S = 60.0  # how long a started agentd may take to connect to its socket
STOPPED_WAIT_S = 3.0  # how long a call waits for a channel to end once the backend stopped the sandbox (a cap)


class PatchTooLarge(SandboxError):
    """The agent's changes, even without the files over the per-file cap, are over the patch cap."""

    def __init__(self, size: int, cap: int) -> None:
        super().__init__(f"refused: the agent's changes come to {size / MB:.0f} MB, over the {cap / MB:.0f} MB "
                         "a hand-back may carry (4 x DECODE_MAX_FILE_MB); leave generated or large files out of "
                         "the repository, or raise DECODE_MAX_FILE_MB")


def _reasons(raw: object) -> dict[str, str]:
    """agentd's [[path, why], ...], bounded: the names are the sandbox's, so untrusted."""
    pairs = raw if isinstance(raw, list) else []
    return {str(p)[:500]: str(why)[:500] for p, why in (x for x in pairs[:1000] if isinstance(x, list) and len(x) == 2)}


class ProcessTransport(QueuedLines):
    """A local child process (agentd itself, `bwrap`, or `docker exec -i`), its lines on stdin and stdout,
    or, given `listener`, on the one connection agentd makes to that unix socket.

    The socket is for `docker exec`: its stdin and stdout pass through the docker CLI, the engine and
    the container's shim, 0.3 ms a round trip here; a unix socket bind-mounted into the container
    reaches agentd directly (issue 26).
    """

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], listener: socket.socket | None = None) -> None:
        super().__init__()
        self._stderr = tempfile.TemporaryFile()
        try:
            self._proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL if listener else subprocess.PIPE,
                stderr=self._stderr,
                env=dict(env),
                start_new_session=True,
            )
        except OSError as e:
            raise SandboxError(f"could not start the sandbox ({argv[0]}): {e}") from None
        self._channel = None if listener is None else self._accept(listener)
        self._reader = self._proc.stdout if self._channel is None else self._channel.makefile("rb")
        self._writer = self._proc.stdin if self._channel is None else self._channel.makefile("wb")
        self.ended = False  # agentd's channel reached its end: agentd is gone (`Launcher.death` asks)
        threading.Thread(target=self._pump, daemon=True).start()

    def _accept(self, listener: socket.socket) -> socket.socket:
        """agentd's connection to `listener`, which is closed then; SandboxError when agentd exits first."""
        deadline = time.monotonic() + CONNECT_S
        try:
            while time.monotonic() < deadline and self._proc.poll() is None:
                if select.select([listener], [], [], 0.05)[0]:
                    return listener.accept()[0]
        finally:
            listener.close()
        self._proc.kill()
        self._proc.wait()
        raise SandboxError(f"agentd did not connect to the sandbox's socket: {self.diagnostics()}")

    def _pump(self) -> None:
        assert self._reader is not None
        try:
            while line := self._reader.readline(ANSWER_CAP + 1):
                if len(line) > ANSWER_CAP:
                    self.overlong = True
                    self._stop_reading()
                    break
                self._lines.put(line)
        except OSError:
            pass  # the connection was cut (close)
        self.ended = True
        self._lines.put(None)

    def _stop_reading(self) -> None:
        """Read agentd's channel no further: its next write fails (EPIPE), on which a sound agentd ends; `close`
        kills one that does not."""
        if self._channel is not None:
            self._channel.shutdown(socket.SHUT_RD)
        elif self._reader is not None:
            self._reader.close()

    def send(self, line: bytes) -> None:
        try:
            assert self._writer is not None
            self._writer.write(line)
            self._writer.flush()
        except (OSError, ValueError):
            raise SandboxError(f"the sandbox process has exited: {self.diagnostics()}") from None

    @property
    def pid(self) -> int:
        """The child process's id (agentd's, or the wrapper's that runs it)."""
        return self._proc.pid

    def exited(self) -> int | None:
        """None while the process runs; its exit status once it ended (a warm pool's liveness check)."""
        return self._proc.poll()

    def wait_exit(self, timeout: float = 2.0) -> int | None:
        """The process's exit status (negative: the signal that ended it), waiting up to `timeout` for a process
        whose channel just ended; None when it still runs."""
        try:
            return self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def diagnostics(self) -> str:
        self._stderr.seek(0)
        text = self._stderr.read()[-2000:].decode("utf-8", "replace").strip()
        return text or f"exit status {self._proc.poll()}"

    def close(self) -> None:
        if self._channel is not None:
            try:
                self._channel.shutdown(socket.SHUT_RDWR)  # agentd reads the end of its requests and exits
            except OSError:
                pass  # agentd is gone already
            self._channel.close()
        if self._proc.poll() is None:
            try:
                assert self._proc.stdin is not None
                self._proc.stdin.close()
                self._proc.wait(timeout=5)
            except (subprocess.TimeoutExpired, BrokenPipeError, OSError):
                self._proc.kill()
                self._proc.wait()
        self._stderr.close()


_OPEN: "weakref.WeakSet[AgentdSandbox]" = weakref.WeakSet()


def close_all() -> int:
    """Tear down every sandbox this process has open, and return how many there were.

    For a server stopping after it released its running jobs: their threads would otherwise
    die with the process and leave containers (or Modal sandboxes) running. Each such job's
    next sandbox call raises `Cancelled`.
    """
    left = list(_OPEN)
    for sandbox in left:
        sandbox.cancel()
    return len(left)


# what agentd's answer to each op carries when it is not a refusal (those not named carry nothing the host reads)
INT_OR_NONE = (int, type(None))
CARRIES: dict[str, dict[str, type | tuple[type, ...]]] = {
    "exec": {"exit_code": INT_OR_NONE, "output": str, "timed_out": bool, "duration": (int, float),
             "dropped_bytes": int},
    "read": {"data": str},
    "glob": {"paths": list},
    "grep": {"matches": list},
    "export": {"size": int},
    "export_read": {"data": str},
    "mcp_io": {"lines": list, "oversize": list, "timed_out": bool, "exited": bool, "status": INT_OR_NONE,
               "stderr": str},
}


def _parsed(line: bytes, op: str, request_id: int) -> dict:
    """agentd's answer to request `request_id` (an `op`), in `line`; `SandboxDied` for any other line: the channel
    is not agentd's alone (a process of the sandbox wrote to it), so no later line on it can be trusted."""
    try:
        answer = json.loads(line)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise SandboxDied(Death(f"agentd's channel carried a line that is not an answer ({len(line)} bytes)"))
    if answer.get("id") != request_id:
        raise SandboxDied(Death(f"agentd answered out of order ({str(answer.get('id'))[:20]} for {request_id})"))
    if answer.get("ok") and any(not isinstance(answer.get(k), t) for k, t in CARRIES.get(op, {}).items()):
        raise SandboxDied(Death(f"agentd's channel carried an answer to {op} that lacks what agentd's own answers "
                                "carry"))
    return answer


class AgentdSandbox:
    """A `Sandbox` backed by agentd over whatever transport the launcher returns."""

    def __init__(self, launcher: Launcher, *, mode: str, network: EgressPolicy = EgressPolicy()) -> None:
        self.mode = mode
        self.root = launcher.root
        self._launcher = launcher
        self._ids = itertools.count(1)
        self._network = network
        self._transport: Transport | None = None
        self._cancelled = False
        self._closed = False
        self._closing = threading.Lock()
        try:
            self._connect()
        except BaseException:
            launcher.close()
            raise
        _OPEN.add(self)

    @property
    def launcher(self) -> Launcher:
        """The backend's launcher this sandbox runs on (the setup cache saves from and restores into it)."""
        return self._launcher

    @property
    def acquired_from(self) -> str:
        """`pool` when the backend handed out a warm sandbox, `cold` or "" otherwise (not every backend pools)."""
        return str(getattr(self._launcher, "acquired_from", ""))

    def _connect(self) -> None:
        self._transport = self._launcher.start(self._network)
        self._call("ping", _timeout=60.0)

    def _call(self, op: str, _timeout: float = 120.0, **fields: object) -> dict:
        transport = self._transport
        self._unless_cancelled(op)
        if transport is None:
            raise SandboxError("the sandbox is closed")
        if self._launcher.stopped():  # a cap stopped it: nothing would answer
            self._died()
        request_id = next(self._ids)
        try:
            transport.send(json.dumps({"id": request_id, "op": op, **fields}).encode() + b"\n")
            line = self._answer(transport, _timeout)
        except TimeoutError:
            raise SandboxError(f"the sandbox stopped answering ({op} after {_timeout:.0f}s)") from None
        except SandboxDied:
            raise  # the transport knows why (`overlong`)
        except SandboxError:
            line = None
        self._unless_cancelled(op)  # an answer that came from the teardown (its command killed) is no answer
        if line is None:
            self._died()
        answer = _parsed(line, op, request_id)
        if cap := self._launcher.stopped():  # passed while the call ran: the agent stops at once
            raise CapReached(cap)
        if not answer.get("ok"):
            raise Refused(answer.get("error") or "refused")
        return answer

    def _answer(self, transport: Transport, timeout: float) -> bytes | None:
        """agentd's answer line (None: its channel ended; TimeoutError past `timeout`), waited for in one-second
        slices: once the backend has stopped the sandbox (a cap), an answer not come in `STOPPED_WAIT_S` never will."""
        deadline = time.monotonic() + timeout
        stopped_at: float | None = None
        while True:
            now = time.monotonic()
            if now >= deadline:
                raise TimeoutError
            if stopped_at is None and self._launcher.stopped():
                stopped_at = now
            if stopped_at is not None and now - stopped_at >= STOPPED_WAIT_S:
                return None
            try:
                return transport.recv(min(1.0, deadline - now))
            except TimeoutError:
                continue

    def _unless_cancelled(self, op: str) -> None:
        if self._cancelled:
            raise Cancelled(f"the sandbox was closed under the {op} call: the process is stopping")

    def _died(self) -> NoReturn:
        """agentd's channel ended: `CapReached` when the launcher stopped the sandbox for good (`stopped`, asked
        now: the disk cap, or the memory cap, which its `death` may find too), else `SandboxDied` with why, as
        the backend knows it."""
        if cap := self._launcher.stopped(now=True):
            raise CapReached(cap)
        death = self._launcher.death()
        if cap := self._launcher.stopped():
            raise CapReached(cap)
        raise SandboxDied(death)

    def check_caps(self, *, disk: bool = True) -> None:
        """`CapReached` when a cap has been passed, measured now (`Launcher.stopped(now=True)`; `disk` False:
        the memory's out-of-memory kills alone, not the walk of the workspace)."""
        if cap := self._launcher.stopped(now=True, disk=disk):
            raise CapReached(cap)

    def run(self, command: str, *, timeout: float = 120.0) -> CommandResult:
        """Run `command` with bash in the workspace; kill its process group at `timeout`. A command that failed
        (killed, or a process under it killed) makes the backend say whether the memory cap did it (an
        out-of-memory kill): then the run stops at that cap. The disk is not walked here, on the hot path of a
        test loop: its poller and the check before an answer is accepted (`check_caps`) cover it."""
        a = self._call("exec", _timeout=timeout + GRACE_S, command=command, timeout=timeout, cap=OUTPUT_CAP)
        if a["exit_code"] != 0 and not a["timed_out"]:
            self.check_caps(disk=False)
        return CommandResult(a["exit_code"], a["output"], a["timed_out"], a["duration"], a["dropped_bytes"])

    def read_file(self, path: str) -> bytes:
        return base64.b64decode(self._call("read", path=path)["data"])

    def write_file(self, path: str, data: bytes) -> None:
        self._call("write", path=path, data=base64.b64encode(data).decode())

    def glob(self, pattern: str, path: str = ".") -> list[str]:
        return self._call("glob", pattern=pattern, path=path)["paths"]

    def grep(self, pattern: str, path: str = ".", glob: str | None = None) -> list[str]:
        return self._call("grep", pattern=pattern, path=path, glob=glob)["matches"]

    def export_patch(self, base_sha: str) -> bytes:
        """The workspace's changes since commit `base_sha`, produced inside the sandbox."""
        return self.hand_back(base_sha).patch

    def hand_back(self, base_sha: str, *, max_file_bytes: int | None = None, max_bytes: int | None = None) -> HandBack:
        """The changes since commit `base_sha` as a patch, without files over `max_file_bytes` (named in `left_out`).

        The patch comes over in chunks, so no answer line is large; past `max_bytes` the whole
        hand-back is refused before (and while) it is read, so the host's memory stays bounded.
        """
        answer = self._call("export", _timeout=600.0, base=base_sha, max_file_bytes=max_file_bytes)
        left_out = _reasons(answer.get("left_out"))
        size = int(answer["size"])
        if max_bytes is not None and size > max_bytes:
            raise PatchTooLarge(size, max_bytes)
        patch = bytearray()
        while len(patch) < size:
            chunk = base64.b64decode(self._call("export_read", offset=len(patch), length=EXPORT_CHUNK)["data"])
            if not chunk:
                break
            patch += chunk
            if max_bytes is not None and len(patch) > max_bytes:
                raise PatchTooLarge(len(patch), max_bytes)
        return HandBack(bytes(patch), left_out)

    def check_hand_back(self, base_sha: str, *, max_file_bytes: int | None = None) -> dict[str, str]:
        """What the hand-back of the workspace as it is now would leave out, and why (agentd's view; the
        host decides with `Workspace.apply_patch`)."""
        answer = self._call("check", _timeout=600.0, base=base_sha, max_file_bytes=max_file_bytes)
        return _reasons(answer.get("left_out"))

    def set_network(self, policy: EgressPolicy) -> None:
        """Apply `policy` from now on. Restarts agentd, which ends whatever earlier commands left running;
        connections made under the old policy are cut."""
        self._network = policy
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        self._connect()

    def blocked(self) -> dict[str, int]:
        """"host:port" -> connections the current policy refused (empty where the backend cannot tell)."""
        return self._launcher.blocked()

    def mcp_start(self, name: str, command: str, env: dict[str, str]) -> None:
        """Start MCP server `name` in the workspace: `command` with bash, the commands' environment plus `env`."""
        self._call("mcp_start", name=name, command=command, env=env)

    def mcp_io(self, name: str, line: str | None, wait: list[int], timeout: float) -> ServerLines:
        """Send `line` to server `name` and read back its lines until one answers an id in `wait` (see
        bot/sandbox/agentd/mcp.py), `timeout` passes or the server ends."""
        a = self._call("mcp_io", _timeout=timeout + GRACE_S, name=name, line=line, wait=wait, timeout=timeout)
        return ServerLines(tuple(a["lines"]), tuple(a["oversize"]), a["timed_out"], a["exited"], a["status"],
                           a["stderr"])

    def mcp_stop(self, name: str) -> None:
        self._call("mcp_stop", name=name)

    def cancel(self) -> None:
        """Close the sandbox from another thread; the call in flight, and any later one, raise `Cancelled`."""
        self._cancelled = True
        self.close()

    def close(self) -> None:
        """Stop agentd and tear the sandbox down. Safe to call twice, and from two threads."""
        with self._closing:
            _OPEN.discard(self)
            if self._transport is not None:
                self._transport.close()
                self._transport = None
            if not self._closed:
                self._closed = True
                self._launcher.close()

    def __enter__(self) -> "AgentdSandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
