"""The file tools inside the sandbox: read, write, glob and grep, each path kept inside the workspace."""

from __future__ import annotations

import base64
import fnmatch
import os
import re
from typing import Iterator

from .paths import Refused, Workspace

MAX_LIST = 1000
GREP_MAX_FILE = 2 * 1024 * 1024
SKIP_DIRS = {".git", "node_modules", "__pycache__", ".venv", ".tox", ".mypy_cache"}


def op_read(ws: Workspace, req: dict) -> dict:
    """Up to `max_bytes` of the file at `path`, base64."""
    real = ws.resolve(req["path"])
    if os.path.isdir(real):
        raise Refused("%s is a directory; use glob to list it" % req["path"])
    try:
        with open(real, "rb") as f:
            data = f.read(int(req.get("max_bytes") or 10 * 1024 * 1024))
    except FileNotFoundError:
        raise Refused("%s does not exist" % req["path"])
    return {"data": base64.b64encode(data).decode()}


def op_write(ws: Workspace, req: dict) -> dict:
    """Write `data` (base64) to `path`, making its directories; never through a symlink at the path itself."""
    real = ws.resolve(req["path"])
    if os.path.isdir(real):
        raise Refused("%s is a directory" % req["path"])
    os.makedirs(os.path.dirname(real), exist_ok=True)
    fd = os.open(real, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(base64.b64decode(req["data"]))
    return {"path": ws.rel(real)}


def walk(base: str) -> Iterator[str]:
    """Every file under `base`, in name order, skipping the directories no search wants (`SKIP_DIRS`)."""
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(filenames):
            yield os.path.join(dirpath, name)


def op_glob(ws: Workspace, req: dict) -> dict:
    """The files under `path` matching `pattern`, newest first, at most `MAX_LIST` of them."""
    base = ws.resolve(req.get("path") or ".")
    regex = glob_regex(req["pattern"])
    found = [full for full in walk(base) if regex.match(os.path.relpath(full, base))]
    found.sort(key=lambda p: -safe_mtime(p))
    return {"paths": [ws.rel(p) for p in found[:MAX_LIST]], "total": len(found)}


def glob_regex(pattern: str) -> re.Pattern:
    """`**` spans directories, `*` and `?` stay within one path segment."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out + r"\Z")


def safe_mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def op_grep(ws: Workspace, req: dict) -> dict:
    """The lines matching the regular expression `pattern` under `path` (text files named by `glob`)."""
    try:
        regex = re.compile(req["pattern"])
    except re.error as e:
        raise Refused("invalid regular expression %r: %s" % (req["pattern"], e))
    base = ws.resolve(req.get("path") or ".")
    file_glob = req.get("glob")
    files = [base] if os.path.isfile(base) else walk(base)
    matches: list[str] = []
    total = 0
    for full in files:
        if file_glob and not fnmatch.fnmatch(os.path.basename(full), file_glob):
            continue
        data = small_text(full)
        if data is None:
            continue
        for number, line in enumerate(data.splitlines(), 1):
            if regex.search(line):
                total += 1
                if len(matches) < MAX_LIST:
                    matches.append("%s:%d:%s" % (ws.rel(full), number, line[:500]))
    return {"matches": matches, "total": total}


def small_text(path: str) -> str | None:
    """The text of the file at `path`, or None when it is unreadable, over `GREP_MAX_FILE` or binary."""
    try:
        if os.path.getsize(path) > GREP_MAX_FILE:
            return None
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", "replace")
