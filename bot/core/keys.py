"""Server keys kept in DECODE_DATA_DIR: made once, 32 random bytes, readable by the owner only (0600).

The transcript links and the session cookie are signed with them, so a restart keeps both valid,
and deleting the file is how an operator revokes every link (or session) at once.
"""

from __future__ import annotations

import secrets
from pathlib import Path

from bot.core.errors import ConfigError
from bot.core.files import create_once

KEY_BYTES = 32


def data_key(data_dir: Path, name: str) -> bytes:
    """The key in `data_dir/name`, created on first use; concurrent first calls agree on one key."""
    path = Path(data_dir) / name
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    create_once(path, secrets.token_bytes(KEY_BYTES))
    try:
        key = path.read_bytes()
    except OSError as e:
        raise ConfigError(f"cannot read the server key {path} ({e.strerror}): check DECODE_DATA_DIR") from None
    if len(key) != KEY_BYTES:  # damaged by hand, or torn by a version that wrote it in place
        raise ConfigError(f"the server key {path} is not {KEY_BYTES} bytes: delete it and restart")
    return key
