"""What the data dir keeps between runs, bounded alike: the setup cache's entries and the repository mirrors.

Each kept thing has a `<key>.json` of metadata in its directory (a dataclass with
`key`, `last_used` and `size`). Both are bounded by the same rule: what is too old
goes, then the least recently used until the rest fit in the cap.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar

from bot.core.files import write_atomic


class Kept(Protocol):
    """A kept thing's metadata: a (frozen) dataclass with these fields, read only here."""

    __dataclass_fields__: ClassVar[dict[str, Any]]  # what `asdict` asks of a dataclass

    @property
    def key(self) -> str: ...

    @property
    def last_used(self) -> float: ...

    @property
    def size(self) -> int: ...


T = TypeVar("T", bound=Kept)


def read_entries(directory: Path, kind: Callable[..., T]) -> list[T]:
    """Every `<key>.json` in `directory` as `kind`, most recently used first; unreadable metadata is skipped."""
    found = []
    for meta in directory.glob("*.json") if directory.is_dir() else ():
        try:
            data: dict[str, Any] = json.loads(meta.read_text())
            found.append(kind(**data))
        except (OSError, ValueError, TypeError):
            continue
    return sorted(found, key=lambda e: e.last_used, reverse=True)


def evict(entries: list[T], cap_bytes: int, too_old: Callable[[T], bool], remove: Callable[[T], bool]) -> list[T]:
    """Remove (`remove`: False when in use) the `entries` (most recently used first) that are `too_old`, then
    those past `cap_bytes` in total; the ones removed."""
    removed: list[T] = []
    total = 0
    for entry in entries:
        total += entry.size
        if (too_old(entry) or total > cap_bytes) and remove(entry):
            removed.append(entry)
            total -= entry.size
    return removed


def write_entry(directory: Path, entry: Kept) -> None:
    """Write `entry` (a dataclass) as `directory/<key>.json`, atomically; the directory is made private."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    write_atomic(directory / f"{entry.key}.json", json.dumps(asdict(entry)))
