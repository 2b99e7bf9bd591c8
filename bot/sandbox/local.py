"""`SANDBOX_MODE=local`: agentd as a plain child process, no isolation.

For trusted input only, even on a disposable machine such as an Actions runner
(whose step holds the API key and the token). The agent can do whatever
the bot's user can. agentd starts with a clean environment, and the harness
marks itself non-dumpable so that a process of the same (non-root) user cannot
read its /proc/PID/environ; a root agent still can. Tool output is redacted
before the model sees it, so known secrets do not reach the model or the
transcript, but only the bwrap and docker backends keep them out of reach.

No egress policy can be enforced either: the agent uses the host's network as
it is, whatever `.github/decode.yml` says, and `blocked()` is always empty.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import sys
import tempfile

from bot.sandbox import EgressPolicy, SandboxSpec
from bot.sandbox.client import AGENTD_PATH, ProcessTransport

SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def clean_env(home: str, mode: str) -> dict[str, str]:
    """The only environment a sandboxed process gets: no variable of the host's."""
    path = os.pathsep.join(dict.fromkeys([os.path.dirname(sys.executable), *SAFE_PATH.split(":")]))
    return {
        "PATH": path,
        "HOME": home,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
        "PAGER": "cat",
        "GIT_PAGER": "cat",
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "DECODE_SANDBOX": mode,
    }


class LocalLauncher:
    """Starts agentd on the host, in the workspace, with a clean environment."""

    def __init__(self, spec: SandboxSpec) -> None:
        self.root = str(spec.workspace.resolve())
        make_undumpable()
        self._home = tempfile.mkdtemp(prefix="decode-home-")

    def start(self, policy: EgressPolicy) -> ProcessTransport:
        """Start agentd; `policy` cannot be enforced here (the host's network is the agent's)."""
        argv = [sys.executable, "-I", str(AGENTD_PATH), self.root]
        return ProcessTransport(argv, clean_env(self._home, "local"))

    def blocked(self) -> dict[str, int]:
        return {}

    def close(self) -> None:
        shutil.rmtree(self._home, ignore_errors=True)


def make_undumpable() -> None:
    """prctl(PR_SET_DUMPABLE, 0): other processes of our uid lose access to our /proc files."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # 4 = PR_SET_DUMPABLE
    except (OSError, AttributeError):
        pass  # not Linux: nothing to protect this way
