"""Server keys kept in DECODE_DATA_DIR: made once, 32 random bytes, readable by the owner only (0600).

The transcript links and the session cookie are signed with them, so a restart keeps both valid,
and deleting the file is how an operator revokes every link (or session) at once.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from bot.core.errors import ConfigError

KEY_BYTES = 32


def data_key(data_dir: Path, name: str) -> bytes:
    """The key in `data_dir/name`, created on first use; concurrent first calls agree on one key."""
    path = Path(data_dir) / name
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(KEY_BYTES))
            f.flush()
            os.fsync(f.fileno())
    try:
        key = path.read_bytes()
    except OSError as e:
        raise ConfigError(f"cannot read the server key {path} ({e.strerror}): check DECODE_DATA_DIR") from None
    if len(key) != KEY_BYTES:  # a torn first write, or another process still writing it
        raise ConfigError(f"the server key {path} is not {KEY_BYTES} bytes: delete it and restart")
    return key
