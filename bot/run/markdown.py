"""Text made safe for Markdown on GitHub and for commit messages: code fences and spans no backtick run can
close, and model-written prose that cannot ping people, close issues or add trailers."""

from __future__ import annotations

import re

_CODE_SPAN = re.compile(r"(`+)(?s:.+?)\1")
_MENTION = re.compile(r"(?<![\w/])@(?=[A-Za-z0-9])")
_CLOSING_REF = re.compile(r"(?i)\b((?:close[sd]?|fix(?:e[sd])?|resolve[sd]?):?\s+[\w.\-/]*#)(?=\d)")
# The same keywords before a full issue or pull request URL, which GitHub acts on too
# (https://docs.github.com/en/issues/tracking-your-work-with-issues/using-issues/linking-a-pull-request-to-an-issue).
_CLOSING_URL = re.compile(r"(?i)\b(close[sd]?|fix(?:e[sd])?|resolve[sd]?)(?=:?\s+<?https?://\S+/(?:issues|pull)/\d)")
# A line git (and GitHub) would read as a trailer, `Token: value` (Co-authored-by, Signed-off-by, Fixes...).
_TRAILER = re.compile(r"^[ \t]*[A-Za-z0-9][A-Za-z0-9_-]*[ \t]*:(?!//)[ \t]*\S.*$\n?", re.MULTILINE)
_TAG = re.compile(r"<(?=[A-Za-z/!?])")


def fence(text: str, lang: str = "", cap: int | None = None) -> str:
    """`text` in a code fence that no backtick run inside it can close."""
    if cap is not None and len(text) > cap:
        half = cap // 2
        text = f"{text[:half]}\n[... {len(text) - 2 * half:,} characters not shown ...]\n{text[-half:]}"
    ticks = "`" * max(3, _longest_backticks(text) + 1)
    return f"{ticks}{lang}\n{text}{'' if text.endswith(chr(10)) else chr(10)}{ticks}"


def code_span(text: str) -> str:
    """`text` as one inline code span, whatever backticks it holds."""
    text = text.replace("\n", " ")
    ticks = "`" * (_longest_backticks(text) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _longest_backticks(text: str) -> int:
    return max((len(run) for run in re.findall(r"`+", text)), default=0)


def safe_prose(text: str) -> str:
    """Model-written Markdown for GitHub: kept as is, but outside code no @pings, no issue-closing
    references and no HTML tags, so a steered model cannot notify people or close issues."""
    parts, pos = [], 0
    for m in _CODE_SPAN.finditer(text):
        parts += [_neutralize(text[pos : m.start()]), m.group(0)]
        pos = m.end()
    return "".join(parts + [_neutralize(text[pos:])])


def safe_commit_text(text: str, *, subject: bool = False) -> str:
    """Model- or user-written text for a commit message: no trailer lines (the harness adds its own
    co-author trailer after this; a `subject` line is never read as one, so it keeps its text), no
    issue-closing references and no @pings, code spans included: GitHub reads a commit message as plain text."""
    text = text if subject else _TRAILER.sub("", text)
    text = _MENTION.sub("@\u2060", text)
    text = _CLOSING_URL.sub(lambda m: m.group(1) + "\u2060", text)
    return _CLOSING_REF.sub(lambda m: m.group(1) + "\u2060", text)


def _neutralize(text: str) -> str:
    text = _MENTION.sub("@\u2060", text)
    text = _CLOSING_URL.sub(lambda m: m.group(1) + "\u2060", text)
    text = _CLOSING_REF.sub(lambda m: m.group(1) + "\u2060", text)
    return _TAG.sub("&lt;", text)
