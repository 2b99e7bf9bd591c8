"""A transcript read a page of turns at a time, so that a run of thousands of turns shows in bounded time and
memory: the run's page and its live updates never load or render the whole `transcript.jsonl`.

`index(path)` reads the file once, without parsing most lines whole (a line's type, time and turn are at its
start, as `Transcript.record` writes them; only responses, trims and the run's start and end are parsed), and
keeps where each turn begins, the run's start and the running totals (`Tally`). Indexes are cached per file
and carried on from where they stopped when the file grows, so a live page's poll reads only the new lines.
A page is `PAGE_TURNS` whole turns (a tool call and its result are in one turn), read by seeking to its first
byte.
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.run.transcript import Tally, parse_events, render_figures

PAGE_TURNS = 50
_CACHED = 64  # indexes kept (of the files most recently asked for)
_PREFIX = re.compile(rb'\{"type": "([a-z_]+)", "t": ([0-9.eE+-]+), "at": "[^"]*"(?:, "turn": (\d+))?')
_PARSED = {b"run_start", b"model_response", b"context_trim", b"run_end"}  # what the head needs of the events


@dataclass
class Index:
    """Where a transcript's turns begin: `turns` (turn, byte offset), over its first `size` bytes (whole lines)."""

    size: int = 0
    start: dict[str, Any] = field(default_factory=dict)
    tally: Tally = field(default_factory=Tally)
    turns: list[tuple[int, int]] = field(default_factory=list)

    @property
    def pages(self) -> int:
        return max(1, -(-len(self.turns) // PAGE_TURNS))

    def figures_markdown(self) -> str:
        """The figures table of the run so far."""
        end = self.tally.end
        stop = str(end["stop_reason"]) if end and end.get("stop_reason") is not None else "incomplete"
        return render_figures(self.tally.figures(), stop)

    def span(self, page: int) -> tuple[int, int]:
        """The bytes of page `page` (1-based, clamped to the pages there are)."""
        page = min(max(page, 1), self.pages)
        first, last = (page - 1) * PAGE_TURNS, page * PAGE_TURNS
        begin = 0 if page == 1 else self.turns[first][1]
        return begin, self.turns[last][1] if last < len(self.turns) else self.size

    def last_turn_at(self) -> int:
        """Where the last turn begins (0 before any): the part of a live page that may still change."""
        return self.turns[-1][1] if self.turns else 0


_indexes: OrderedDict[Path, Index] = OrderedDict()
_lock = threading.Lock()


def index(path: Path) -> Index:
    """The index of `path` as it is now, carried on from the cached one when the file only grew."""
    path = Path(path)
    with _lock:
        cached = _indexes.pop(path, None)
    try:
        size = path.stat().st_size
    except OSError:
        return Index()
    found = cached if cached is not None and cached.size <= size else Index()
    if found.size < size:
        _scan(path, found)
    with _lock:
        _indexes[path] = found
        while len(_indexes) > _CACHED:
            _indexes.popitem(last=False)
    return found


def _scan(path: Path, found: Index) -> None:
    """Index the whole lines of `path` after `found.size`; a torn last line waits for the next scan."""
    last = found.turns[-1][0] if found.turns else 0
    with open(path, "rb") as f:
        f.seek(found.size)
        offset = found.size
        for line in f:
            if not line.endswith(b"\n"):
                break
            at, offset = offset, offset + len(line)
            event, turn = _peek(line)
            found.size = offset
            if event is None:
                continue
            if turn is not None and turn > last:
                found.turns.append((turn, at))
                last = turn
            if event["type"] == "run_start" and not found.start:
                found.start = event
            found.tally.add(event)


def _peek(line: bytes) -> tuple[dict[str, Any] | None, int | None]:
    """(the event, or as much of it as the index needs; its turn) of one line; (None, None) for a bad one."""
    match = _PREFIX.match(line)
    if match is not None and match.group(1) not in _PARSED:
        turn = int(match.group(3)) if match.group(3) else None
        return {"type": match.group(1).decode(), "t": float(match.group(2))}, turn
    try:
        event = json.loads(line)
    except ValueError:
        return None, None
    if not isinstance(event, dict) or "type" not in event:
        return None, None
    turn = event.get("turn")
    return event, turn if isinstance(turn, int) else None


def read_span(path: Path, begin: int, end: int) -> list[dict[str, Any]]:
    """The events in bytes [`begin`, `end`) of `path` (whole lines; a torn one is skipped)."""
    with open(path, "rb") as f:
        f.seek(begin)
        return parse_events(f.read(max(end - begin, 0)).splitlines())
