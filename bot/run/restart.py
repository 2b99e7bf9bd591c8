"""A sandbox that dies loses nothing: the run goes on in a new one.

`Restarting` is the `Sandbox` the agent works in. It forwards every call to the run's current sandbox;
when that sandbox dies under a call (`SandboxDied`: agentd's channel ended, and the backend says why,
`Launcher.death`), it closes it, opens a new one on the kept workspace through the pipeline's own
opener (setup again, through the setup cache when it hits), and answers the cut call with one line
saying so. The cut call is not run again: the command may be what killed the sandbox.

Setup on a kept workspace runs the agent's files (its `setup.sh`, its `package.json`): the opener is told
so (`kept`), and then runs setup under the agent's own egress policy, never setup's, and never fills the
setup cache. Otherwise an agent could rewrite what setup runs and kill its sandbox to run it with setup's
internet (issue 32). Each restart counts against DECODE_MAX_RESTARTS, whoever caused it.

The workspace outlives its sandbox. docker and bwrap bind-mount the host's directory and local runs in
it, so a new sandbox sees every change. Modal works on an uploaded copy (`keeps_workspace` False): after
every turn whose tool calls could change files, the changes are checkpointed on the host (the hand-back
patch since the base) and a new sandbox gets them back (`CopiesWorkspace.restore_changes`).

Past `max_restarts` (DECODE_MAX_RESTARTS), or when the workspace is gone, the call raises `SandboxLost`:
the agent stops there, and the work so far is handed back from a fresh sandbox without setup (or from
the last checkpoint) and committed as incomplete, as an interrupt's is. A sandbox the backend stopped
for a cap (`CapReached`: the disk, or the memory, whose out-of-memory kill may take agentd or the whole
container with it) is not restarted: the call raises it and the work is handed back the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

from bot.core.errors import DecodeError
from bot.sandbox import CommandResult, EgressPolicy, HandBack, Refused
from bot.sandbox.client import AgentdSandbox
from bot.sandbox.protocol import CapReached, CopiesWorkspace, Death, SandboxDied, SandboxLost, ServerLines

T = TypeVar("T")
Opener = Callable[[], AgentdSandbox]
SetUpOpener = Callable[[bool], AgentdSandbox]  # True: the workspace is the one the agent left (a restart)


class Restarted(Refused):
    """The answer to the call a dying sandbox cut: one line saying the sandbox was restarted, and why."""


class Restarting:
    """The run's `Sandbox`, restarted on its kept workspace when it dies (see the module docstring).

    `open_set_up(kept)` opens a sandbox and runs setup in it (the pipeline's steps), `kept` saying the workspace
    holds the agent's changes; `open_bare` opens one without setup, to hand the work back after the run could
    not go on. `restarts` holds each restart's reason."""

    def __init__(self, open_set_up: SetUpOpener, open_bare: Opener, *, workspace: Path, base_sha: str,
                 max_restarts: int, caps: dict[str, int], record: Callable[..., Any],
                 progress: Callable[[str], None]) -> None:
        self._open_set_up, self._open_bare = open_set_up, open_bare
        self._workspace, self._base_sha, self._caps = workspace, base_sha, caps
        self._max, self._record, self._progress = max_restarts, record, progress
        self.restarts: list[str] = []
        self._checkpoint: HandBack | None = None  # a copied workspace's changes after the last turn that made any
        self._dirty = False  # a call since the last checkpoint may have changed files
        self._sandbox: AgentdSandbox | None = open_set_up(False)
        self.root, self.mode = self._sandbox.root, self._sandbox.mode
        self._copies = not type(self._sandbox.launcher).capabilities.keeps_workspace

    def _current(self) -> AgentdSandbox:
        if self._sandbox is None:  # the run could not go on: a sandbox without setup, to hand the work back
            self._sandbox = self._restored(self._open_bare())
        return self._sandbox

    def _restored(self, sandbox: AgentdSandbox) -> AgentdSandbox:
        """`sandbox` with a copied workspace's checkpointed changes given back."""
        if self._copies and self._checkpoint is not None and self._checkpoint.patch:
            try:
                cast(CopiesWorkspace, sandbox.launcher).restore_changes(self._checkpoint.patch)
            except BaseException:
                sandbox.close()
                raise
        return sandbox

    def _guarded(self, call: Callable[[AgentdSandbox], T], *, changes: bool = False) -> T:
        """`call` on the current sandbox; when the sandbox dies under it, restart and answer with `Restarted`."""
        self._dirty = self._dirty or changes
        try:
            return call(self._current())
        except SandboxDied as e:
            raise Restarted(self._restart(e.death)) from None
        except CapReached:  # stopped for good: the work is handed back from a sandbox opened for that alone
            self.close()
            raise

    def _restart(self, death: Death) -> str:
        """Replace the dead sandbox and return the line that answers the cut call; `SandboxLost` when the run
        cannot go on in a new one."""
        dead, self._sandbox = self._sandbox, None
        if dead is not None:
            dead.close()
        if len(self.restarts) >= self._max:
            raise SandboxLost(f"the sandbox died {len(self.restarts) + 1} times, more than DECODE_MAX_RESTARTS="
                              f"{self._max} allows restarting it; the last time {death.reason}")
        if not self._workspace.is_dir():
            raise SandboxLost(f"the sandbox died ({death.reason}) and its workspace is gone from the host")
        self.restarts.append(death.reason)
        count = f"restart {len(self.restarts)} of at most {self._max}"
        self._record("sandbox_restart", reason=death.reason, oom=death.oom, restart=len(self.restarts),
                     max_restarts=self._max)
        self._progress(f"the sandbox died ({death.reason}): starting a new one on the kept workspace ({count})")
        try:
            self._sandbox = self._restored(self._open_set_up(not self._copies))
        except DecodeError as e:
            raise SandboxLost(f"the sandbox died ({death.reason}) and a new one could not be started: {e}") from None
        setup = "setup included" if self._copies else \
            "setup ran again under this run's network policy for your commands, since the workspace holds your changes"
        return (f"[decode] the sandbox died during this call ({death.reason}); a new one was started on the kept "
                f"workspace ({count}), {setup}. This call was not carried out and is not run again: check "
                "the workspace, and change the command if it is what killed the sandbox.")

    def checkpoint(self) -> None:
        """After a turn: keep a copied workspace's changes on the host when its calls may have changed files
        (nothing to do where the workspace is the host's)."""
        if not (self._copies and self._dirty and self._sandbox is not None):
            return
        try:
            self._checkpoint = self._sandbox.hand_back(self._base_sha, max_file_bytes=self._caps["max_file_bytes"],
                                                       max_bytes=self._caps["max_bytes"])
            self._dirty = False
        except DecodeError as e:  # a dead sandbox is restarted at the next call; the last checkpoint stays
            self._record("note", text=f"the workspace's changes could not be checkpointed: {e}")

    def run(self, command: str, *, timeout: float = 120.0) -> CommandResult:
        return self._guarded(lambda sb: sb.run(command, timeout=timeout), changes=True)

    def read_file(self, path: str) -> bytes:
        return self._guarded(lambda sb: sb.read_file(path))

    def write_file(self, path: str, data: bytes) -> None:
        self._guarded(lambda sb: sb.write_file(path, data), changes=True)

    def glob(self, pattern: str, path: str = ".") -> list[str]:
        return self._guarded(lambda sb: sb.glob(pattern, path))

    def grep(self, pattern: str, path: str = ".", glob: str | None = None) -> list[str]:
        return self._guarded(lambda sb: sb.grep(pattern, path, glob))

    def check_hand_back(self, base_sha: str, *, max_file_bytes: int | None = None) -> dict[str, str]:
        return self._guarded(lambda sb: sb.check_hand_back(base_sha, max_file_bytes=max_file_bytes))

    def check_caps(self) -> None:
        """`CapReached` when the current sandbox passed a cap, measured now (none open: nothing to measure)."""
        if self._sandbox is not None:
            self._guarded(lambda sb: sb.check_caps())

    def export_patch(self, base_sha: str) -> bytes:
        return self.hand_back(base_sha).patch

    def hand_back(self, base_sha: str, *, max_file_bytes: int | None = None, max_bytes: int | None = None) -> HandBack:
        """The changes since commit `base_sha`, from the current sandbox (a fresh one without setup when the run
        could not go on); the last checkpoint, or nothing, when no sandbox can be opened on the workspace any more."""
        if self._sandbox is None:
            try:
                self._current()
            except DecodeError as e:
                kept = "the last checkpoint is" if self._checkpoint is not None else "nothing is"
                self._record("note", text=f"no sandbox could be opened to hand the work back ({e}): {kept} kept")
                return self._checkpoint or HandBack(b"", {})
        try:
            return self._current().hand_back(base_sha, max_file_bytes=max_file_bytes, max_bytes=max_bytes)
        except CapReached as e:  # passed after the agent's last call: from a sandbox opened for the hand-back
            self.close()
            self._record("note", text=f"{e} after the agent's last call; the work is handed back as it is")
            return self.hand_back(base_sha, max_file_bytes=max_file_bytes, max_bytes=max_bytes)

    def set_network(self, policy: EgressPolicy) -> None:
        self._current().set_network(policy)

    def mcp_start(self, name: str, command: str, env: dict[str, str]) -> None:
        self._guarded(lambda sb: sb.mcp_start(name, command, env))

    def mcp_io(self, name: str, line: str | None, wait: list[int], timeout: float) -> ServerLines:
        """An MCP server's exchange, on the current sandbox (a restart starts its servers again, in setup)."""
        return self._guarded(lambda sb: sb.mcp_io(name, line, wait, timeout), changes=True)

    def mcp_stop(self, name: str) -> None:
        self._guarded(lambda sb: sb.mcp_stop(name))

    def blocked(self) -> dict[str, int]:
        return self._sandbox.blocked() if self._sandbox is not None else {}

    def close(self) -> None:
        """Close the current sandbox, if one is open."""
        sandbox, self._sandbox = self._sandbox, None
        if sandbox is not None:
            sandbox.close()
