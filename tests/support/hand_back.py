"""The agent's changes made by a script in the sandbox's copy, handed back through a local sandbox."""

from __future__ import annotations

import subprocess

from bot.sandbox import HandBack, SandboxSpec, open_sandbox
from bot.workspace.clone import Workspace
from tests.conftest import GIT_ENV


def hand_back(ws: Workspace, script: str) -> HandBack:
    """Run `script` with bash in `ws.path`, then hand the changes back; the pre-answer check must agree."""
    subprocess.run(["bash", "-ec", script], cwd=ws.path, check=True, env=GIT_ENV)
    sandbox = open_sandbox("local", SandboxSpec(workspace=ws.path))
    try:
        assert sandbox.check_hand_back(ws.base_sha) == sandbox.hand_back(ws.base_sha).left_out
        return sandbox.hand_back(ws.base_sha)
    finally:
        sandbox.close()
