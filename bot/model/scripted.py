"""A model that replays a fixed list of assistant turns.

Ships with the package for tests, demos and replays: `DECODE_MODEL=scripted:FILE`
where FILE is either a session (JSON: a list of turns, or {"turns": [...]},
each turn a list of content blocks or {"content": [...]}) or a transcript JSONL
written by a previous run, whose recorded responses are replayed in order.

A file of several sessions, `{"sessions": [{"when": TEXT, "turns": [...]}, ...]}`, replays the first one
whose `when` occurs in the run's first user message (the task): one file serves a task set whose runs each
need their own session, as the evaluation set in bench/eval/ does (`decode eval`, docs/eval.md).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from bot.core.errors import ConfigError, DecodeError
from bot.model.info import ModelInfo, built_in
from bot.model.protocol import Reply, StreamProgress, Usage


class ScriptExhausted(DecodeError):
    """The model was asked for more turns than the script holds."""


class ScriptedModel:
    """Answers the n-th request with the n-th scripted turn."""

    def __init__(self, turns: list[list[dict[str, Any]]], name: str = "scripted", *,
                 sessions: dict[str, list[Any]] | None = None) -> None:
        self.name = name
        self.turns = [normalize_turn(t, i) for i, t in enumerate(turns)]
        self.sessions = {when: [normalize_turn(t, i) for i, t in enumerate(session)]
                         for when, session in (sessions or {}).items()}
        self.calls = 0

    @classmethod
    def load(cls, path: str | Path) -> "ScriptedModel":
        """Read a session file or a transcript JSONL; errors name the file."""
        path = Path(path)
        try:
            text = path.read_text()
        except OSError as e:
            raise ConfigError(f"DECODE_MODEL=scripted:{path}: cannot read the script ({e.strerror})") from None
        try:
            sessions = None
            if path.suffix == ".jsonl":
                events = [json.loads(line) for line in text.splitlines() if line.strip()]
                turns = [e["content"] for e in events if e.get("type") == "model_response"]
            else:
                data = json.loads(text)
                sessions = _sessions(data["sessions"]) if isinstance(data, dict) and "sessions" in data else None
                turns = [] if sessions else data["turns"] if isinstance(data, dict) else data
            if not isinstance(turns, list):
                raise TypeError("the turns must be a list")
            if not turns and not sessions:  # a task file or an empty list: else the run failed at its first turn
                raise ValueError("it holds no model turns")
        except (ValueError, KeyError, TypeError) as e:
            raise ConfigError(f"DECODE_MODEL=scripted:{path}: not a session or transcript file ({e})") from None
        try:
            return cls(turns, name=f"scripted:{path.name}", sessions=sessions)
        except ConfigError as e:
            raise ConfigError(f"DECODE_MODEL=scripted:{path}: {e}") from None

    def check(self) -> None:
        """Nothing to check: the session is already loaded."""

    def info(self) -> ModelInfo:
        """The built-in figures of a model of no known family: a 200k window, no thinking."""
        return built_in(self.name)

    def complete(
        self, *, system: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int,
        thinking: dict[str, Any] | None = None, on_stream: StreamProgress | None = None,
        context_management: dict[str, Any] | None = None,
    ) -> Reply:
        """The next scripted turn, thinking blocks included as scripted (`thinking`, `on_stream` and
        `context_management` change nothing: the answer is already written, and its model has no edits)."""
        if self.calls == 0 and self.sessions:
            self.turns = self._session_for(messages)
        if self.calls >= len(self.turns):
            raise ScriptExhausted(f"the scripted session has only {len(self.turns)} turns")
        content = copy.deepcopy(self.turns[self.calls])
        self.calls += 1
        prompt_chars = len(system) + len(json.dumps(messages)) + len(json.dumps(tools))
        usage = Usage(input_tokens=prompt_chars // 4, output_tokens=len(json.dumps(content)) // 4)
        stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
        return Reply(content=content, stop_reason=stop, usage=usage, model=self.name)


    def _session_for(self, messages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
        """The session whose `when` text occurs in the first user message; an error naming none that does."""
        first = json.dumps(messages[0]["content"] if messages else "", ensure_ascii=False)
        for when, turns in self.sessions.items():
            if json.dumps(when, ensure_ascii=False)[1:-1] in first:
                return turns
        raise ScriptExhausted(f"no session of {self.name} matches the task: give one a `when` text the task "
                              "contains")


def _sessions(entries: Any) -> dict[str, list[Any]]:
    """`{"sessions": [{"when", "turns"}]}` as when -> turns, in file order."""
    if not isinstance(entries, list) or not entries:
        raise TypeError("`sessions` must be a non-empty list of {\"when\", \"turns\"}")
    found = {}
    for n, entry in enumerate(entries, 1):
        if not isinstance(entry, dict) or not isinstance(entry.get("when"), str) or not entry["when"] \
                or not isinstance(entry.get("turns"), list):
            raise TypeError(f"session {n} needs a non-empty `when` text and a list of `turns`")
        found[entry["when"]] = entry["turns"]
    return found


def normalize_turn(turn: Any, index: int) -> list[dict[str, Any]]:
    """A turn as a list of content blocks (text, tool_use, thinking, redacted_thinking, as the API writes them);
    tool_use blocks get ids when they lack one."""
    if isinstance(turn, dict):
        turn = turn.get("content")
    if isinstance(turn, str):
        turn = [{"type": "text", "text": turn}]
    if not isinstance(turn, list) or not all(isinstance(b, dict) and "type" in b for b in turn):
        raise ConfigError(f"scripted turn {index + 1} is not a list of content blocks")
    blocks = []
    for n, block in enumerate(turn):
        block = dict(block)
        if block["type"] == "text" and not isinstance(block.get("text"), str):
            raise ConfigError(f"scripted turn {index + 1}, block {n + 1}: a text block needs a string `text`")
        if block["type"] == "tool_use" and not isinstance(block.get("name"), str):
            raise ConfigError(f"scripted turn {index + 1}, block {n + 1}: a tool_use block needs a string `name`")
        if block["type"] == "tool_use" and not isinstance(block.get("input", {}), dict):
            raise ConfigError(f"scripted turn {index + 1}, block {n + 1}: the `input` of a tool_use block must be "
                              "an object")
        if block["type"] == "thinking" and not isinstance(block.get("thinking"), str):
            raise ConfigError(f"scripted turn {index + 1}, block {n + 1}: a thinking block needs a string `thinking`")
        if block["type"] == "redacted_thinking" and not isinstance(block.get("data"), str):
            raise ConfigError(f"scripted turn {index + 1}, block {n + 1}: a redacted_thinking block needs a string "
                              "`data`")
        if block["type"] == "tool_use":
            block.setdefault("id", f"toolu_s{index + 1:03d}_{n}")
            block.setdefault("input", {})
        blocks.append(block)
    return blocks
