"""Real MCP servers nobody here wrote (`mcp-server-time`, `mcp-server-git`), where a sandbox can run them.

They are installed once per machine with pip into `SITE`, a host directory that bwrap, local and the modal double
show as it is; docker sandboxes get it in a test image of our own tag built on the sandbox image
(`image`), never a retag of the shared one. A decode.yml names them with `PYTHONPATH` pointing there.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGES = ("mcp-server-time==2026.10.19", "mcp-server-git==2026.10.19")
KEY = hashlib.sha256(" ".join(PACKAGES).encode()).hexdigest()[:12]
SITE = Path("/usr/local/share/decode-tests") / f"mcp-servers-{KEY}"  # /usr: the modal double shows it too
IMAGE = f"decode-sandbox-mcp-test:{hashlib.sha256(str(SITE).encode()).hexdigest()[:12]}"
ENV = f"{{PYTHONPATH: {SITE}}}"


def installed() -> Path:
    """`SITE`, installed by pip on first use (a lock keeps parallel test processes to one install)."""
    if (SITE / ".done").exists():
        return SITE
    SITE.parent.mkdir(parents=True, exist_ok=True)
    with open(SITE.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (SITE / ".done").exists():
            shutil.rmtree(SITE, ignore_errors=True)
            res = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                                  "--target", str(SITE), *PACKAGES], capture_output=True, text=True)
            if res.returncode != 0:
                pytest.fail(f"could not install {', '.join(PACKAGES)}: {res.stderr[-2000:]}")
            (SITE / ".done").write_text("")
    return SITE


def image(base: str) -> str:
    """A docker image of our own tag: `base` with `SITE` copied in at the same path."""
    site = installed()
    if subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True).returncode == 0:
        return IMAGE
    dockerfile = f"FROM {base}\nCOPY . {SITE}\n"
    res = subprocess.run(["docker", "build", "-q", "-t", IMAGE, "-f", "-", str(site)], input=dockerfile,
                         capture_output=True, text=True)
    if res.returncode != 0:
        pytest.fail(f"could not build {IMAGE}: {res.stderr[-2000:]}")
    return IMAGE


def server(name: str, command: str, *, required: bool = False, env: str = ENV) -> str:
    """One `mcp:` entry of a decode.yml."""
    return f"  {name}:\n    command: {command}\n    env: {env}\n" + ("    required: true\n" if required else "")


TIME = server("time", "python3 -m mcp_server_time --local-timezone UTC")
GIT = server("git", "python3 -m mcp_server_git --repository .")
