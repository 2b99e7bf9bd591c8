"""Keep tool output inside the model's context: head and tail, with a note."""

from __future__ import annotations

MAX_LINES = 2000
MAX_BYTES = 50_000


def truncate(text: str, *, max_lines: int = MAX_LINES, max_bytes: int = MAX_BYTES) -> str:
    """`text` unchanged if small, else its first and last halves and what was cut.

    One flood (a `yes`, a huge log) must not blow the context, yet the end of an
    output (the failing test, the exit message) is usually what matters, so both
    ends are kept.
    """
    data = text.encode("utf-8", "replace")
    lines = text.splitlines(keepends=True)
    if len(lines) <= max_lines and len(data) <= max_bytes:
        return text
    keep = max_lines // 2
    if len(lines) > max_lines:
        head_src, tail_src = "".join(lines[:keep]), "".join(lines[-keep:])
        omitted_lines = len(lines) - 2 * keep
    else:
        head_src = tail_src = text
        omitted_lines = 0
    head = _clip(head_src, max_bytes // 2, from_end=False)
    tail = _clip(tail_src, max_bytes // 2, from_end=True)
    omitted_bytes = len(data) - len(head.encode()) - len(tail.encode())
    note = (
        f"\n[... output truncated: {omitted_bytes} bytes"
        + (f" ({omitted_lines} lines)" if omitted_lines else "")
        + " omitted from the middle; narrow the command (grep, head, tail) to see them ...]\n"
    )
    return head + note + tail


def _clip(text: str, limit: int, *, from_end: bool) -> str:
    data = text.encode("utf-8", "replace")
    if len(data) <= limit:
        return text
    part = data[-limit:] if from_end else data[:limit]
    return part.decode("utf-8", "ignore")
