"""The Markdown lines of a transcript's events, one helper per kind (bot/run/transcript.py renders with them):
a tool call with its result, a command, a trim of the context, the one-line events, a turn's figures."""

from __future__ import annotations

import difflib
import json
from typing import Any

from bot.agent.context import TRIM_AT
from bot.run.markdown import code_span, fence, safe_prose

HEADER_FIELDS = (("repo", "repo"), ("branch", "branch"), ("base", "base"), ("base_sha", "base"),
                  ("config_sha", "decode.yml from"), ("model", "model"), ("thinking", "thinking"),
                  ("sandbox", "sandbox"))
USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens")
_LANGS = {"py": "python", "js": "javascript", "ts": "typescript", "tsx": "tsx", "jsx": "jsx", "json": "json",
          "yml": "yaml", "yaml": "yaml", "toml": "toml", "md": "markdown", "sh": "bash", "go": "go", "rs": "rust",
          "rb": "ruby", "java": "java", "c": "c", "h": "c", "cpp": "cpp", "html": "html", "css": "css", "sql": "sql"}


def turn_meta(e: dict[str, Any]) -> str:
    u = e.get("usage") or {}
    parts = [f"{u.get('input_tokens', 0):,} in", f"{u.get('output_tokens', 0):,} out"]
    if u.get("cache_read_tokens"):
        parts.append(f"{u['cache_read_tokens']:,} cache read")
    if u.get("cache_creation_tokens"):
        parts.append(f"{u['cache_creation_tokens']:,} cache write")
    parts += [duration(float(e.get("duration_s") or 0)), f"${float(e.get('cost_usd') or 0):.4f}"]
    return "_" + " · ".join(parts) + "_"


def tool_call(name: str, args: dict[str, Any], result: dict[str, Any] | None, cap: int | None) -> list[str]:
    path = str(args.get("path") or ".")
    if name == "bash":
        extra = f" (timeout {args['timeout']}s)" if args.get("timeout") else ""
        lines = [f"**bash**{extra}", "", fence(str(args.get("command", "")), "bash", cap)]
    elif name == "write":
        lines = [f"**write** {code_span(path)}", "", fence(str(args.get("content", "")), _lang(path), cap)]
    elif name == "edit":
        every = " (every occurrence)" if args.get("replace_all") else ""
        diff = _diff(str(args.get("old_string", "")), str(args.get("new_string", "")))
        lines = [f"**edit** {code_span(path)}{every}", "", fence(diff, "diff", cap)]
    elif name == "read":
        span = f" from line {args['offset']}" if args.get("offset") else ""
        span += f", {args['limit']} lines" if args.get("limit") else ""
        lines = [f"**read** {code_span(path)}{span}"]
    elif name in ("glob", "grep"):
        extra = f" in files {code_span(str(args['glob']))}" if args.get("glob") else ""
        lines = [f"**{name}** {code_span(str(args.get('pattern', '')))} in {code_span(path)}{extra}"]
    else:
        lines = [f"**{name}**", "", fence(json.dumps(args, indent=2, ensure_ascii=False), "json", cap)]
    lines.append("")
    return lines + (tool_result(result, cap) if result else ["_(no result recorded)_", ""])


def command_run(e: dict[str, Any], cap: int | None) -> list[str]:
    """A setup or verify command the harness ran: its status, the command, its output."""
    status = "timed out" if e.get("timed_out") else f"exit {e.get('exit_code')}"
    if e["type"] == "verify":
        status = f"round {e.get('round', '?')}, {'✅ passed' if e.get('passed') else '❌ ' + status}"
    return [f"**{e['type']}** ({status}, {duration(float(e.get('duration_s') or 0))})", "",
            fence(str(e.get("command", "")), "bash", cap), "",
            fence(str(e.get("output") or "(no output)"), "text", cap), ""]


def context_trim(e: dict[str, Any]) -> list[str]:
    """A trim of the conversation to fit the model's window: why, what went, the prompt's size before and
    after (a summary's text is its turn's, just above)."""
    why = {"prompt_too_long": "the API answered \"prompt is too long\"",
           "context_editing": "by the API's context editing"}.get(
        str(e.get("reason")), f"the next prompt would have passed {TRIM_AT:.0%} of the room")
    what = {"summary": "older turns summarised",
            "server": f"the API cleared the results of {e.get('cleared_tool_uses', '?')} old tool calls"}.get(
        str(e.get("kind")), "old tool results replaced by notes")
    sizes = f"~{int(e.get('tokens_before') or 0):,} → ~{int(e.get('tokens_after') or 0):,} tokens"
    window = f" of a {int(e['window']):,}-token window" if e.get("window") else ""
    out = [f"> **context trimmed** ({why}): {what}, {sizes}{window}"]
    return out + [f"> - {safe_prose(str(item), inline=True)}" for item in (e.get("trimmed") or [])[:50]] + [""]


def _setup_cache(e: dict[str, Any]) -> str:
    """A setup cache hit (setup skipped), miss (setup ran; saved or why not) or refused entry, as one line."""
    key = code_span(str(e.get("key", "?")))
    if e.get("result") == "hit":
        return f"> **setup cache:** hit, key {key}: setup skipped, its state restored"
    if e.get("result") == "refused":
        why = safe_prose(str(e.get("reason", "")), inline=True)
        return f"> **setup cache:** entry {key} refused and removed: {why}"
    return f"> **setup cache:** miss, key {key}: setup ran; {safe_prose(str(e.get('saved', '')), inline=True)}"


def _sandbox_restart(e: dict[str, Any]) -> str:
    return (f"> **sandbox restarted ({e.get('restart')} of at most {e.get('max_restarts')}):** "
            f"{safe_prose(str(e.get('reason', '')), inline=True)}")


def _mcp_server(e: dict[str, Any]) -> str:
    name = code_span(str(e.get("name")))
    if e.get("state") == "started":
        tools = ", ".join(code_span(str(t)) for t in (e.get("tools") or [])[:50]) or "none"
        return f"> **MCP server {name}** started (MCP {safe_prose(str(e.get('protocol')))}); its tools: {tools}"
    return f"> **MCP server {name} {safe_prose(str(e.get('reason')))}**; the run goes on without it"


ONE_LINE = {"setup_cache": _setup_cache, "sandbox_restart": _sandbox_restart,  # event type -> its one line
             "mcp_server": _mcp_server}


def tool_result(e: dict[str, Any], cap: int | None) -> list[str]:
    output = e.get("output")
    text = output if isinstance(output, str) else json.dumps(output, indent=2, ensure_ascii=False)
    label = "error" if e.get("is_error") else "result"
    took = f" ({duration(float(e['duration_s']))})" if e.get("duration_s") is not None else ""
    return [f"{label}{took}:", "", fence(text or "(no output)", "text", cap), ""]


def user_texts(messages: list[dict[str, Any]]) -> list[str]:
    texts = []
    for m in messages:
        if m.get("role") != "user":
            continue
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        texts += [b["text"] for b in blocks if b.get("type") == "text" and str(b.get("text", "")).strip()]
    return texts


def _diff(old: str, new: str) -> str:
    a, b = old.splitlines(), new.splitlines()
    lines = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            lines += [" " + x for x in a[i1:i2]]
        else:
            lines += ["-" + x for x in a[i1:i2]] + ["+" + x for x in b[j1:j2]]
    return "\n".join(lines)


def _lang(path: str) -> str:
    return _LANGS.get(path.rsplit(".", 1)[-1].lower(), "") if "." in path else ""


def duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    return f"{minutes // 60}h {minutes % 60:02d}m"
