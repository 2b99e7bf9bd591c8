"""The conversation's size: every request fits the model's window, and the prompt cache keeps working.

The room for a prompt is the model's window (`Model.info().window`, the Models API's
`max_input_tokens`) less the answer's `max_tokens`. Before each request the next
prompt's size is estimated: the last reply's usage gives the exact size of the last
prompt, and what was added since counts at least one token per 3 characters (more
when the last prompt was denser). When the estimate passes `TRIM_AT` of the room,
the conversation is trimmed in one batch down to `TRIM_TO` of it, so the prompt
then grows for several turns with a stable prefix that the cache reads:

1. the oldest tool results first: each one's content becomes a short note of what
   it was and how to get it again (the tool_use / tool_result pairs stay whole);
2. if that is not enough, the older turns are folded into a summary the model
   writes (one extra call), added to the first message after the task.

The task (the first message's first block), the system prompt and the tools are
never trimmed, nor the latest turn (the last assistant message, its thinking blocks
unchanged, and what follows it). A "prompt is too long" answer (`shrink`) trims
without the estimate: every older tool result, then every older turn. The policy is
documented in docs/context.md.

Where the Models API says the model has `clear_tool_uses_20250919` (`server`), step 1
is the API's: the conversation is left whole and each request asks the API to clear
the tool results of the oldest `cleared` tool uses (`management`: `keep` is every
tool use but those), so the prompt the model reads is the same between two batches
and the cache keeps reading it. The API's usage (of the prompt after its edit) is what
`seen` counts from, and a reply whose edit cleared more than the last one is a trim of
kind `server`. The summary and the "prompt is too long" answer stay the harness's own.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

TRIM_AT = 0.8  # of the room: a prompt estimated over it is trimmed...
TRIM_TO = 0.5  # ...down to this share, in one batch
MIN_TOKENS_PER_CHAR = 1 / 3  # new content is counted at least this dense (English and code run near 1/4)
NOTE_PREFIX = "[trimmed to save context: "
SUMMARY_HEAD = "[Summary of the earlier turns, written when they were trimmed to save context]\n\n"
CLEAR_TOOL_USES = "clear_tool_uses_20250919"  # the API's own clearing of old tool results (context editing)
CLEARED_CHARS = 60  # the API's placeholder for a cleared tool result, about, until its usage says
MIN_TRIMMED_CHARS = 1_000  # a shorter tool result stays: a note would save little and break the cached prefix
RESULT_CHARS = 1_500  # of each tool result shown to the summariser (its head and tail)

Message = dict[str, Any]
Summarise = Callable[[str, int], str]  # (the older turns as text, the summary's token budget) -> the summary


@dataclass(frozen=True)
class Trim:
    """One trim of the conversation: what went (`kind` "tool_results", "summary", or "server" for the API's
    own clearing) and the prompt's size before and after, in tokens (estimated; the API's for "server")."""

    kind: str
    trimmed: list[str]
    tokens_before: int
    tokens_after: int
    dropped: int = 0  # messages removed from the list (a summary folds them into the first)
    summary: str = ""
    cleared: int = 0  # tool uses the API cleared from the prompt in all ("server")


@dataclass
class Context:
    """Owns the conversation's size for one run: `seen` after each reply, `fit` before each request,
    `shrink` after a "prompt is too long" answer; `management` is what to ask of the API, if anything."""

    window: int
    max_tokens: int
    fixed_chars: int = 0  # the system prompt and the tool schemas: in every prompt, never trimmed
    server: bool = False  # the API clears old tool results itself (CLEAR_TOOL_USES)
    _tokens: int = field(default=0, init=False)  # the last prompt's exact size...
    _chars: int = field(default=0, init=False)  # ...and its length in characters
    _removed: int = field(default=0, init=False)  # characters trimmed since that prompt
    _cleared: int = field(default=0, init=False)  # the oldest tool uses the API is asked to clear...
    _applied: int = field(default=0, init=False)  # ...and those it reported clearing last

    @classmethod
    def of(cls, window: int, max_tokens: int, system: str, tools: list[dict[str, Any]],
           edits: frozenset[str] = frozenset()) -> "Context":
        """The context of a run whose every request carries `system` and `tools` and asks for `max_tokens`, on a
        model with the server-side context `edits` the Models API lists."""
        return cls(window, max_tokens, len(system) + len(json.dumps(tools)), CLEAR_TOOL_USES in edits)

    @property
    def ratio(self) -> float:
        """Tokens per character of the last prompt (`MIN_TOKENS_PER_CHAR` before the first reply)."""
        return self._tokens / self._chars if self._chars else MIN_TOKENS_PER_CHAR

    @property
    def room(self) -> int:
        """The largest prompt that leaves the answer its `max_tokens`."""
        return self.window - self.max_tokens

    def management(self, messages: list[Message]) -> dict[str, Any] | None:
        """The request's `context_management`: clear the results of the oldest `_cleared` tool uses once the
        prompt passes `TRIM_TO` of the room (None where the model cannot)."""
        if not self.server:
            return None
        trigger = {"type": "input_tokens", "value": int(TRIM_TO * self.room)}
        keep = {"type": "tool_uses", "value": len(_tool_uses(messages)) - self._cleared}
        return {"edits": [{"type": CLEAR_TOOL_USES, "trigger": trigger, "keep": keep}]}

    def seen(self, messages: list[Message], prompt_tokens: int, edits: Sequence[dict[str, Any]] = ()) -> Trim | None:
        """The prompt of `messages` (as just sent) was `prompt_tokens` long, by the API's usage, after the
        context `edits` the API applied. A trim of kind "server" when they cleared more than the last ones."""
        applied = [e for e in edits if e.get("type") == CLEAR_TOOL_USES]
        cleared = sum(int(e.get("cleared_tool_uses") or 0) for e in applied)
        freed = sum(int(e.get("cleared_input_tokens") or 0) for e in applied)
        self._tokens, self._chars, self._removed = prompt_tokens, self._sent(messages, cleared), 0
        before, self._applied = self._applied, cleared
        if cleared <= before:
            return None
        newly = list(_tool_uses(messages).values())[before:cleared]
        return Trim("server", [_describe(use, {}) for use in newly], prompt_tokens + freed, prompt_tokens,
                    cleared=cleared)

    def estimate(self, messages: list[Message]) -> int:
        """The next prompt's size in tokens: exact up to the last prompt, conservative for what was added."""
        added = self._sent(messages) + self._removed - self._chars
        return int(self._tokens + max(0, added) * max(self.ratio, MIN_TOKENS_PER_CHAR) - self._removed * self.ratio)

    def fit(self, messages: list[Message], summarise: Summarise) -> list[Trim]:
        """Trim `messages` in place when the next prompt would pass `TRIM_AT` of the room: tool results (the
        API clears them where it can: no trim until it says so), then (if still over `TRIM_TO`) a summary.
        The trims made, none when it fits."""
        if self.estimate(messages) <= TRIM_AT * self.room:
            return []
        target = int(TRIM_TO * self.room)
        trims: list[Trim] = []
        if self.server:
            self._clear_on_server(messages, target)
        elif trim := self._trim_results(messages, target):
            trims.append(trim)
        if self.estimate(messages) > target and (summary := self._summarise(messages, target, summarise)):
            trims.append(summary)
        return trims

    def shrink(self, messages: list[Message], summarise: Summarise) -> Trim | None:
        """After a "prompt is too long" answer, trim harder than the estimate asks: every older tool result;
        if none is left, every older turn into a summary. None when nothing is left to trim."""
        return self._trim_results(messages, 0) or self._summarise(messages, 0, summarise)

    def _clear_on_server(self, messages: list[Message], target: int) -> None:
        """Ask the API to clear the results of more of the oldest tool uses (the latest turn's never), until
        the estimate is at most `target`."""
        ceiling = len(_tool_uses(messages[:_latest_turn(messages)]))
        while self._cleared < ceiling and self.estimate(messages) > target:
            before = self._sent(messages)
            self._cleared += 1
            self._removed += before - self._sent(messages)

    def _sent(self, messages: list[Message], cleared: int | None = None) -> int:
        """The prompt's length in characters as the model reads it: the API clears the results of the oldest
        `cleared` tool uses (`_cleared` unless said)."""
        cleared = self._cleared if cleared is None else cleared
        ids = set(list(_tool_uses(messages))[:cleared])
        saved = sum(max(0, len(json.dumps(b)) - len(json.dumps({**b, "content": ""})) - CLEARED_CHARS)
                    for m in messages if m["role"] == "user" and isinstance(m["content"], list)
                    for b in m["content"] if b.get("type") == "tool_result" and b.get("tool_use_id") in ids)
        return self.fixed_chars + _chars(messages) - saved

    def _trim_results(self, messages: list[Message], target: int) -> Trim | None:
        """Replace the oldest tool results' content by notes, message by message, until the estimate is at
        most `target`."""
        before = size = self.estimate(messages)
        uses = _tool_uses(messages)
        trimmed: list[str] = []
        for message in messages[1:_latest_turn(messages)]:
            if size <= target:
                break
            if message["role"] != "user" or not isinstance(message["content"], list):
                continue
            blocks = [_trimmed(b, uses) if _trimmable(b) else b for b in message["content"]]
            saved = _chars([message]) - _chars([{**message, "content": blocks}])
            if saved <= 0:
                continue
            trimmed += [_describe(uses.get(b.get("tool_use_id")), b) for b, new in zip(message["content"], blocks)
                        if new is not b]
            sent = self._sent(messages)
            message["content"] = blocks
            self._removed += sent - self._sent(messages)
            size = self.estimate(messages)
        return Trim("tool_results", trimmed, before, size) if trimmed else None

    def _summarise(self, messages: list[Message], target: int, summarise: Summarise) -> Trim | None:
        """Fold the older turns (as few as bring the estimate to `target`, the latest turn never) into a
        summary the model writes, kept in the first message after the task."""
        latest = _latest_turn(messages)
        if latest <= 1:
            return None
        before = self.estimate(messages)
        budget = max(256, min(2_000, self.max_tokens, self.room // 10))
        cut, folded = latest, 0
        for index in range(1, latest):  # the earliest cut before an assistant turn that brings the size down
            if index > 1 and messages[index]["role"] == "assistant" and before - folded * self.ratio + budget <= target:
                cut = index
                break
            folded += _chars([messages[index]])
        first = messages[0]
        task, earlier = _split_first(first)
        limit = int(TRIM_TO * self.room / max(self.ratio, MIN_TOKENS_PER_CHAR))
        text = render_turns(str(task.get("text", "")), earlier, messages[1:cut], limit=limit)
        summary = summarise(text, budget).strip() or "(the model wrote no summary)"
        new_first = {**first, "content": [task, {"type": "text", "text": SUMMARY_HEAD + summary}]}
        sent, folded_uses = self._sent(messages), len(_tool_uses(messages[:cut]))
        turns = sum(m["role"] == "assistant" for m in messages[1:cut])
        described = [f"{turns} earlier turn{'s' if turns != 1 else ''} ({cut - 1} messages)"]
        messages[:cut] = [new_first]
        self._cleared, self._applied = max(0, self._cleared - folded_uses), max(0, self._applied - folded_uses)
        self._removed += sent - self._sent(messages)
        return Trim("summary", described, before, self.estimate(messages), dropped=cut - 1, summary=summary)


def render_turns(task: str, earlier: str, messages: list[Message], *, limit: int) -> str:
    """The task and the older turns as plain text for the summariser (tool results cut to their head and
    tail, thinking left out), at most `limit` characters (the middle goes first)."""
    lines = [f"The task:\n{task}"] + ([f"Summary of what came before:\n{earlier}"] if earlier else [])
    uses = _tool_uses(messages)
    for message in messages:
        content = message["content"]
        for block in [{"type": "text", "text": content}] if isinstance(content, str) else content:
            kind = block.get("type")
            if kind == "text" and block.get("text", "").strip():
                lines.append(f"{message['role']}: {block['text'].strip()}")
            elif kind == "tool_use":
                lines.append(f"assistant called {_describe(block, {})}: {json.dumps(block.get('input'))[:2_000]}")
            elif kind == "tool_result":
                output = _clip(_text_of(block), RESULT_CHARS)
                failed = " (failed)" if block.get("is_error") else ""
                lines.append(f"result of {_describe(uses.get(block.get('tool_use_id') or ''), {})}{failed}:\n{output}")
    return _clip("\n\n".join(lines), limit)


def _latest_turn(messages: list[Message]) -> int:
    """The index of the last assistant message: it and what follows are the latest turn, never trimmed."""
    return next((i for i in range(len(messages) - 1, 0, -1) if messages[i]["role"] == "assistant"), 0)


def _split_first(first: Message) -> tuple[dict[str, Any], str]:
    """The task's block and an earlier summary's text (empty when there is none) of the first message."""
    content = first["content"]
    if isinstance(content, str):
        return {"type": "text", "text": content}, ""
    summary = "\n".join(b.get("text", "") for b in content[1:]).removeprefix(SUMMARY_HEAD)
    return content[0], summary


def _tool_uses(messages: list[Message]) -> dict[str, dict[str, Any]]:
    return {b["id"]: b for m in messages if m["role"] == "assistant" and isinstance(m["content"], list)
            for b in m["content"] if b.get("type") == "tool_use"}


def _trimmable(block: dict[str, Any]) -> bool:
    return block.get("type") == "tool_result" and not _text_of(block).startswith(NOTE_PREFIX)


def _trimmed(block: dict[str, Any], uses: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The tool_result `block` with its content replaced by a note of what it was and how to get it again."""
    use = uses.get(block.get("tool_use_id") or "") or {}
    again = "run it again" if use.get("name") == "bash" else f"call {use.get('name', 'the tool')} again"
    note = (f"{NOTE_PREFIX}the {'output' if use.get('name') == 'bash' else 'result'} of {_describe(use, {})} "
            f"({len(_text_of(block)):,} chars); {again} if you need it]")
    return {**block, "content": note} if len(_text_of(block)) >= max(MIN_TRIMMED_CHARS, 2 * len(note)) else block


def _describe(use: dict[str, Any] | None, result: dict[str, Any]) -> str:
    """A tool call in a few words: its name and its command, path or pattern."""
    if not use:
        return f"a tool call ({result.get('tool_use_id', '?')})"
    args = use.get("input") or {}
    detail = args.get("command") or args.get("path") or args.get("pattern") or ""
    detail = str(detail).strip().splitlines()[0][:120] if str(detail).strip() else ""
    return f"{use.get('name', '?')} `{detail}`" if detail else str(use.get("name", "?"))


def _text_of(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return str(content or "")


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = max(0, limit // 2 - 40)
    return f"{text[:half]}\n[... {len(text) - 2 * half:,} characters left out ...]\n{text[-half:]}"


def _chars(messages: list[Message]) -> int:
    return len(json.dumps(messages)) if messages else 0
