"""Files other processes may read while they are written: whole or absent, never half.

Workers, `decode serve`, `decode worker` and every `decode run` share DECODE_DATA_DIR, and
several of them can make the same file on first use (the server's keys, the stored App, a
cache's metadata, a run's record.json). Each such file is written to a temporary file of
its own in the same directory, flushed to disk, then renamed into place (`write_atomic`:
readers see the old content or the new) or hard-linked into place (`create_once`: the first
process's content wins, the others read it). A plain `open(path, "w")` would let a reader
see an empty or partial file; an `O_EXCL` create alone still lets one see it empty until
its creator has written it. `unusable_dir` says why a directory such as DECODE_DATA_DIR
cannot hold them, before a command starts on it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def _written(path: Path, data: bytes, mode: int) -> Path:
    """A new temporary file beside `path`, holding `data` on disk, with `mode`."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)  # 0600, a unique name
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def write_atomic(path: Path, data: bytes | str, mode: int = 0o600) -> Path:
    """Replace `path`'s content with `data` (str: UTF-8) at once; returns `path`."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    tmp = _written(path, raw, mode)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def create_once(path: Path, data: bytes, mode: int = 0o600) -> bool:
    """Make `path` hold `data` unless it exists; True when this call made it. Concurrent callers, in
    threads or processes, agree: one creates it whole, the others find it whole."""
    tmp = _written(path, data, mode)
    try:
        os.link(tmp, path)  # fails when `path` exists: the exclusive step, after the content is complete
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)
    return True


def unusable_dir(path: Path) -> str | None:
    """Why the directory `path` cannot be used or made by this user, None when it can (statted only: nothing
    is created; a path the system refuses anyway, /proc's, fails at its first write)."""
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return "is a file, not a directory" if existing == path else f"cannot be made: {existing} is a file"
    if not os.access(existing, os.W_OK | os.X_OK):
        return "is not writable by this user" if existing == path else f"cannot be made: {existing} is not writable"
    return None
