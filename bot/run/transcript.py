"""The run's record: every event as one redacted JSON line, and a Markdown rendering of it.

`Transcript` appends `{"type", "t", "at", ...fields}` to `transcript.jsonl` and
flushes each line, so a crash keeps everything up to the crash. Every event goes
through the `Redactor` before it is written; nothing unredacted touches disk.

Event types and their fields, as the agent loop records them:

- `run_start`: task, repo, model, sandbox, budget (dict), branch, base or base_sha, thinking (`off`,
  `adaptive` or `budget N tokens`)
- `phase`: name (preparing, sandbox, setup, agent, verifying)
- `setup`: command, exit_code, output, timed_out, duration_s (the repository's setup commands)
- `verify`: command, round, exit_code, passed, output (its redacted tail), timed_out, duration_s
  (decode.yml's `verify` commands after the agent's answer, `bot.run.verify`)
- `model_request`: turn, system, new_messages, tools (names), max_tokens
- `model_progress`: turn, phase (`thinking` or `writing`), tokens (about how many so far): a long answer
  streaming
- `model_response`: turn, content (blocks as dicts; thinking blocks keep their signatures here and are never
  shown with them), stop_reason, usage
  {input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens},
  cost_usd, duration_s, request_id
- `tool_call`: turn, id, name, input
- `tool_result`: turn, id, name, output, is_error, duration_s
- `context_trim`: turn, reason (`estimate`, `prompt_too_long`, or `context_editing` for the API's own),
  kind (`tool_results`, `summary`, or `server`: the API cleared old tool results), trimmed (what went, in
  words), tokens_before, tokens_after, window, summary, cleared_tool_uses (`server`: all it cleared)
  (bot/agent/context.py; a summary's own request and response carry `purpose: context_summary`; a request
  with server-side edits carries `context_management`, its response the `context_edits` applied)
- `note`: text
- `sandbox_restart`: reason (why the sandbox died, in words), oom, restart (1, 2...), max_restarts (a new
  sandbox was opened on the kept workspace, bot/run/restart.py)
- `run_end`: stop_reason ("completed", "max_turns", "max_cost", "max_tokens",
  "wall_clock", "max_disk", "max_memory", "error", "interrupted", "sandbox_lost"), summary, turns, usage, cost_usd, wall_s, error, trims

`render_markdown` turns a list of events into the `transcript.md` a reviewer reads.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

from bot.core.files import write_atomic
from bot.core.redact import Redactor
from bot.core.utf8 import utf8_safe
from bot.run.markdown import code_span, fence, home_of, safe_prose
from bot.model.protocol import Usage
from bot.run.result import Figures
from bot.run.transcript_lines import (
    HEADER_FIELDS, ONE_LINE, USAGE_KEYS, command_run, context_trim, duration, tool_call, tool_result, turn_meta, user_texts,
)

JSONL_NAME = "transcript.jsonl"
MD_NAME = "transcript.md"
_RESERVED = {"type", "t", "at"}


class Transcript:
    """Records a run's events in `directory/transcript.jsonl`, redacted, one flushed line each."""

    def __init__(self, directory: Path, redactor: Redactor,
                 watch: Callable[[dict[str, Any]], None] | None = None) -> None:
        """`watch` sees every event as written (redacted), after it is on disk: the live tracking comment."""
        self.directory = Path(directory)
        self._watch = watch
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / JSONL_NAME
        self.md_path = self.directory / MD_NAME
        self._redactor = redactor
        self._started = time.monotonic()
        self._lock = threading.Lock()
        self._file: TextIO | None = open(self.path, "a", encoding="utf-8")

    def record(self, type: str, **fields: Any) -> dict[str, Any]:  # noqa: A002 - the event's own field name
        """Append one event; returns it as written (redacted)."""
        clash = _RESERVED & fields.keys()
        if clash:
            raise ValueError(f"event fields {sorted(clash)} are reserved")
        now = datetime.now(timezone.utc)
        event = {
            "type": type,
            "t": round(time.monotonic() - self._started, 3),
            "at": now.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            **fields,
        }
        redacted: dict[str, Any] = self._redactor.redact_obj(_jsonable(event))
        line = json.dumps(redacted, ensure_ascii=False) + "\n"
        with self._lock:
            if self._file is None:
                raise ValueError(f"the transcript {self.path} is closed")
            self._file.write(line)
            self._file.flush()
        if self._watch is not None:
            self._watch(redacted)
        return redacted

    def events(self) -> list[dict[str, Any]]:
        """Every event recorded so far, read back from disk."""
        return load_events(self.path)

    def write_markdown(self) -> Path:
        """Render the events on disk to `transcript.md` and return its path."""
        return write_atomic(self.md_path, render_markdown(self.events()), 0o644)  # the page may be reading it

    def close(self) -> None:
        """Flush to disk and close. Safe to call twice."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def __enter__(self) -> "Transcript":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def load_events(path: Path) -> list[dict[str, Any]]:
    """The events of a `transcript.jsonl`; a torn last line (a crash mid-write) is skipped."""
    with open(path, "rb") as f:
        return parse_events(f)


def parse_events(lines: Iterable[bytes]) -> list[dict[str, Any]]:
    """The events among JSON `lines` of a transcript; a blank, torn or foreign line is skipped."""
    events = []
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and "type" in event:
            events.append(event)
    return events


def _jsonable(obj: Any) -> Any:
    """`obj` with dataclasses (`Usage`), paths, tuples and sets turned into JSON types."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return _jsonable(dataclasses.asdict(obj))
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in (sorted(obj, key=str) if isinstance(obj, (set, frozenset)) else obj)]
    if isinstance(obj, str):
        return utf8_safe(obj)
    if isinstance(obj, (int, float, bool)) or obj is None:
        return obj
    if isinstance(obj, bytes):
        return obj.decode("utf-8", "replace")
    if isinstance(obj, datetime):
        return obj.isoformat()
    return str(obj)


class Tally:
    """The run's totals, taken one event at a time (`figures` over a list; a page index over a file)."""

    def __init__(self) -> None:
        self.usage = dict.fromkeys(USAGE_KEYS, 0)
        self.turns = self.trims = 0
        self.cost_usd = self.seconds = 0.0
        self.end: dict[str, Any] | None = None

    def add(self, e: dict[str, Any]) -> None:
        """Count `e`: a response's usage, turn and cost, a trim, the time of the last event, the run's end."""
        self.seconds = float(e.get("t") or 0)
        if e["type"] == "model_response":
            for k in USAGE_KEYS:
                self.usage[k] += int((e.get("usage") or {}).get(k) or 0)
            self.turns = max(self.turns, int(e.get("turn") or 0))
            self.cost_usd += float(e.get("cost_usd") or 0)
        elif e["type"] == "context_trim":
            self.trims += 1
        elif e["type"] == "run_end":
            self.end = e

    def figures(self) -> Figures:
        """The totals: `run_end`'s, or the responses' sums when the run never ended."""
        usage, end = dict(self.usage), self.end
        figs: dict[str, Any] = {"trims": self.trims, "turns": self.turns, "cost_usd": self.cost_usd,
                                "seconds": self.seconds}
        if end:
            usage.update({k: int(v or 0) for k, v in (end.get("usage") or {}).items() if k in USAGE_KEYS})
            figs.update({k: end[k] for k in ("turns", "cost_usd") if end.get(k) is not None})
            figs["seconds"] = end["wall_s"] if end.get("wall_s") is not None else figs["seconds"]
        return Figures(usage=Usage(**usage), **figs)


def figures(events: list[dict[str, Any]]) -> Figures:
    """The run's totals: from `run_end`, or summed from the responses when the run never ended (the events keep
    the names they were written with, `wall_s` and the model's usage names: transcripts outlive this code)."""
    tally = Tally()
    for e in events:
        tally.add(e)
    return tally.figures()


def stop_reason(events: list[dict[str, Any]]) -> str:
    """Why the run stopped, from its `run_end`; `incomplete` when it never ended."""
    end = next((e for e in reversed(events) if e["type"] == "run_end"), None)
    return str(end["stop_reason"]) if end and end.get("stop_reason") is not None else "incomplete"


def render_figures(figs: Figures, stop: str) -> str:
    """The figures and how the run stopped, as a one-row Markdown table."""
    head = ["turns", "input tokens", "output tokens", "cache read", "cache write", "context trims", "cost",
            "wall time", "stop"]
    row = [
        str(figs.turns),
        *(f"{getattr(figs.usage, k):,}" for k in USAGE_KEYS),
        str(figs.trims),
        f"${figs.cost_usd:.2f}",
        duration(figs.seconds),
        stop,
    ]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in (head, ["---"] * len(head), row))


def render_markdown(events: list[dict[str, Any]], *, max_block_chars: int | None = None, brief: bool = False) -> str:
    """The human-readable transcript: figures, then turn by turn text, tool calls and results, then the summary.

    Tool input and output go into code fences longer than any backtick run they
    contain; the model's prose has its @mentions, issue-closing references and
    HTML tags neutralized, since the transcript lands in a PR body.
    `max_block_chars` shortens long blocks (head and tail kept); None keeps all. `brief` leaves out what
    a pull request body shows above its transcript copy: the figures, the task and the summary.
    """
    start = next((e for e in events if e["type"] == "run_start"), {})
    head = render_head(start, None if brief else render_figures(figures(events), stop_reason(events)),
                       max_block_chars=max_block_chars)
    return head + render_events(events, max_block_chars=max_block_chars, brief=brief, repo=start.get("repo"))


def render_head(start: dict[str, Any], figs: str | None, *, max_block_chars: int | None = None) -> str:
    """The transcript's head: where it ran (`run_start`), the figures table `figs` and the task (both left out
    when `figs` is None: a pull request shows them above its copy)."""
    start, out = dict(start), ["# decode-bot transcript", ""]
    for key in ("base_sha", "config_sha"):
        if start.get(key):
            start[key] = str(start[key])[:12]
    where = [f"{label} {code_span(str(start[k]))}" for k, label in HEADER_FIELDS if start.get(k)]
    if where:
        out += [" · ".join(where), ""]
    if figs is not None:
        out += [figs, ""]
        if start.get("task"):
            out += ["**Task**", "", fence(str(start["task"]), "text", max_block_chars), ""]
    return "\n".join(out) + "\n"


def render_events(events: list[dict[str, Any]], *, max_block_chars: int | None = None, brief: bool = False,
                  repo: str | None = None) -> str:
    """`events` turn by turn (a whole transcript, or a page of whole turns): text, tool calls with their
    results, notes, and the summary (unless `brief`); model prose keeps links to `repo` (`run_start`'s) only."""
    cap, out = max_block_chars, []
    home = home_of(str(repo or ""))
    results = {e.get("id"): e for e in events if e["type"] == "tool_result"}
    called = {e.get("id") for e in events if e["type"] == "tool_call"}
    shown: set[Any] = set()
    for e in events:
        kind = e["type"]
        if kind == "model_request" and e.get("purpose") != "context_summary":  # its prompt: the older turns again
            for text in user_texts(e.get("new_messages") or []):
                label = "prompt" if e.get("turn") in (0, 1, None) else "user message"
                out += [f"<details><summary>{label}</summary>", "", fence(text, "text", cap), "", "</details>", ""]
        elif kind == "model_response":
            out += _response(e, results, called, shown, cap, home)
        elif kind == "tool_call":
            out += tool_call(e.get("name", "?"), e.get("input") or {}, results.get(e.get("id")), cap)
            shown.add(e.get("id"))
        elif kind == "tool_result" and e.get("id") not in shown:
            out += [f"**{e.get('name', 'tool')}** result", "", *tool_result(e, cap)]
        elif kind == "instructions":
            used = ", ".join(code_span(str(f)) for f in e.get("files") or []) or "none"
            notes = [f"> - {safe_prose(str(n), inline=True)}" for n in e.get("notes") or []]
            out += [f"> **repository instructions:** {used}", *notes]
            out += [""]
        elif kind == "context_trim":
            out += context_trim(e)
        elif kind == "note":
            out += [f"> **note:** {safe_prose(str(e.get('text', '')), home, inline=True)}", ""]
        elif kind == "egress_blocked":
            rows = [f"{dest} x{count}" for dest, count in (e.get("destinations") or {}).items()]
            out += ["**network:** the egress policy blocked", "", fence("\n".join(rows), "text", cap), ""]
        elif kind in ("setup", "verify"):
            out += command_run(e, cap)
        elif kind in ONE_LINE:
            out += [ONE_LINE[kind](e), ""]
        elif kind == "run_end":
            if str(e.get("summary") or "").strip() and not brief:
                out += ["## Summary", "", safe_prose(str(e["summary"]).strip(), home), ""]
            if e.get("error"):
                out += ["## Error", "", fence(str(e["error"]), "text", cap), ""]
    return "\n".join(out).rstrip() + "\n" if out else ""


def _response(e: dict[str, Any], results: dict[Any, dict[str, Any]], called: set[Any], shown: set[Any],
              cap: int | None, home: str | None) -> list[str]:
    """A `model_response` event's lines: its text, its thinking (links kept to `home` only, `safe_prose`), and
    its tool calls with their results where no `tool_call` event of the same id follows (those are added to
    `shown`)."""
    what = ": a summary of the older turns, to save context" if e.get("purpose") == "context_summary" else ""
    out = [f"## Turn {e.get('turn', '?')}{what}", "", turn_meta(e), ""]
    for block in e.get("content") or []:
        if block.get("type") == "text" and block.get("text", "").strip():
            out += [safe_prose(block["text"].strip(), home), ""]
        elif block.get("type") == "thinking" and block.get("thinking", "").strip():
            out += ["> " + safe_prose(block["thinking"].strip(), home).replace("\n", "\n> "), ""]
        elif block.get("type") == "redacted_thinking":
            out += ["> *(thinking the API keeps encrypted)*", ""]
        elif block.get("type") == "tool_use" and block.get("id") not in called:
            out += tool_call(block.get("name", "?"), block.get("input") or {}, results.get(block.get("id")), cap)
            shown.add(block.get("id"))
    return out
