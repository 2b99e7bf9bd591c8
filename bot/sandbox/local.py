"""`SANDBOX_MODE=local`: agentd as a plain child process, no isolation.

For disposable machines only (an Actions runner VM). The agent can do whatever
the bot's user can, except read the bot's secrets: agentd starts with a clean
environment, never the harness's.
"""

from __future__ import annotations

import os
import sys
import tempfile
import shutil

from bot.sandbox import SandboxSpec
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
        self._home = tempfile.mkdtemp(prefix="decode-home-")

    def start(self, network: bool) -> ProcessTransport:
        argv = [sys.executable, "-I", str(AGENTD_PATH), self.root]
        return ProcessTransport(argv, clean_env(self._home, "local"))

    def close(self) -> None:
        shutil.rmtree(self._home, ignore_errors=True)
