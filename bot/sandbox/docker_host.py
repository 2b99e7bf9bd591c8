"""What a docker sandbox's container takes from the host: bind mounts, and the private directories made
beside the workspace for it (its /tmp and /var/tmp, the egress proxy's), and a tree handed to its uid.

Beside the workspace, so that a bot that itself runs in a container (deploy.md: the data directory at the
same path) names them on the engine's path; in the host's temp dir when the workspace's parent is not
writable.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from bot.core.errors import SandboxError
from bot.sandbox.egress import EgressProxy

TEMP_DIRS = {"tmp": "/tmp", "var-tmp": "/var/tmp"}  # `temp_near`'s entries and where they are mounted


def chown_tree(top: Path, uid: int, gid: int) -> None:
    """chown -R -h `top` on the host (the bot is root when it needs this)."""
    try:
        os.lchown(top, uid, gid)
        for parent, dirs, files in os.walk(top):
            for name in dirs + files:
                os.lchown(os.path.join(parent, name), uid, gid)
    except OSError as e:
        raise SandboxError(f"cannot hand the workspace {top} to uid {uid} for the sandbox: {e}") from None


def mount(source: object, target: str, readonly: bool = False) -> str:
    """A `--mount` bind value, CSV-quoted so commas in the host path survive."""
    field = f"source={source}".replace('"', '""')
    return f'type=bind,"{field}",target={target}' + (",readonly" if readonly else "")


def temp_near(workspace: Path) -> Path:
    """A fresh 0700 directory beside the workspace holding the sandbox's /tmp and /var/tmp (`TEMP_DIRS`, 1777
    as on a host), where the disk guard polls them."""
    try:
        temp = Path(tempfile.mkdtemp(prefix=".decode-temp-", dir=workspace.parent))
    except OSError:
        temp = Path(tempfile.mkdtemp(prefix=".decode-temp-"))
    for name in TEMP_DIRS:
        (temp / name).mkdir()
        (temp / name).chmod(0o1777)
    return temp


def egress_near(workspace: Path) -> EgressProxy:
    """An egress proxy in a private directory beside the workspace."""
    try:
        return EgressProxy.in_private_dir(workspace.parent)
    except OSError:
        return EgressProxy.in_private_dir()
