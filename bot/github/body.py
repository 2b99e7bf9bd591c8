"""The pull request body and the comments that carry what does not fit in it.

GitHub caps an issue, PR or comment body at 65,536 characters. The body holds
the summary, `Fixes #N`, the files changed, the notes, the figures and the start
of the transcript; the rest of the transcript is on the run's page when the
server has a public URL, else it follows in PR comments, each one wrapped in its
own `<details>` block, at most `MAX_COMMENTS` of them: a run of hundreds of turns is not posted as dozens
of comments (each a content-creating request), the last part says where the whole transcript is. A split inside a fenced code block closes the fence at the
end of one part and reopens it at the start of the next, so each part renders
on its own and the parts together hold every line of the transcript.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.run.markdown import clip, code_span, span_edges
from bot.run.verify import Verification

BODY_LIMIT = 65_536
MAX_COMMENTS = 8  # parts of the transcript posted after the body; a longer one is cut, pointing at the whole
_WRAPPER_ROOM = 400  # the <details> wrapper, part labels and a reopened fence
_CUT = "\n… cut here: the whole transcript is in `transcript.md` (the Action's `transcript_dir`, or the run's " \
    "directory).\n"
_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")


def split_markdown(text: str, limit: int, first_limit: int | None = None) -> list[str]:
    """Split Markdown into parts of at most `limit` characters (`first_limit` for the first) at line
    ends, closing an open code fence at the end of a part and reopening it in the next."""
    parts: list[str] = []
    current: list[str] = []
    size = 0
    fence: str | None = None  # the open fence's marker, e.g. "````"
    opener = ""  # the line that opened it, to reopen in the next part
    longest = min(limit, first_limit or limit) // 2
    for line in (piece for raw in text.splitlines(keepends=True)
                 for piece in _pieces(raw, longest, spans=fence is None)):
        closing = f"{fence}\n" if fence else ""
        room = first_limit if first_limit is not None and not parts else limit
        if current and size + len(line) + len(closing) > room:
            parts.append("".join(current) + closing)
            current, size = ([opener] if fence else []), (len(opener) if fence else 0)
        current.append(line)
        size += len(line)
        match = _FENCE.match(line.rstrip("\n"))
        if match:
            marker, info = match.group(2), match.group(3)
            if fence is None:
                fence, opener = marker, line if line.endswith("\n") else line + "\n"
            elif marker[0] == fence[0] and len(marker) >= len(fence) and not info.strip():
                fence = None
    if current:
        parts.append("".join(current))
    return parts


def _pieces(line: str, longest: int, *, spans: bool) -> list[str]:
    """`line`, cut into pieces of about `longest` characters when it is longer. With `spans` (a line outside a
    fenced block) a cut inside a code span closes the span at the end of one piece and reopens it at the start
    of the next, as `split_markdown` does for fences: a part must never end inside a span, where the rest of
    the span's text would render as Markdown (an image, a link) rather than code."""
    out = []
    while len(line) > longest:
        cut = longest
        span = next(((s, e, run) for s, e, run in span_edges(line) if s < cut < e), None) if spans else None
        if span is not None:
            start, end, run = span
            while cut > start + len(run) and "`" in line[cut - 1:cut + 1]:
                cut -= 1  # a backtick beside the cut would lengthen the closing run
            if cut <= start + len(run):
                cut = start if start > 0 else end
        if span is None or cut in (span[0], span[1]):
            out.append(line[:cut] + "\n")
            line = line[cut:]
        else:
            out.append(line[:cut] + span[2] + "\n")
            line = span[2] + line[cut:]
    return out + [line]


def _details(summary: str, content: str) -> str:
    return f"<details><summary>{summary}</summary>\n\n{content.rstrip()}\n\n</details>\n"


@dataclass(frozen=True)
class Report:
    """What a run tells people on GitHub, each part once: the agent's summary, the files changed, what the
    harness verified (`verification_section`), the harness's notes (left out, blocked), the figures, and a copy of the transcript with each tool output
    capped (`bot.run.transcript.render_markdown(brief=True)`). With `transcript_url` (the run's page on
    `decode serve`) the copy is cut to fit one body and links there; without, the rest follows in comments."""

    summary: str
    figures: str
    transcript: str
    changes: str = ""
    notes: str = ""
    transcript_url: str | None = None
    verification: str = ""

    def texts(self, *, closes: int | None = None, limit: int = BODY_LIMIT) -> tuple[str, list[str]]:
        """(body, follow-up comments) of at most `limit` characters each; `closes`: the issue the body fixes."""
        head = self.summary.strip() + "\n\n"
        if closes is not None:
            head += f"Fixes #{closes}\n\n"
        for part in (self.changes, self.verification, self.notes, self.figures):
            if part.strip():
                head += part.strip() + "\n\n"
        if self.transcript_url:
            head += f"📜 [The full transcript]({self.transcript_url}), live while the run goes.\n\n"
        first_room = limit - len(head) - _WRAPPER_ROOM
        if first_room < 1000:  # an enormous summary: keep the contract parts, move the transcript out entirely
            head = clip(head, limit - _WRAPPER_ROOM - 200) + "\n\n(summary truncated)\n\n"
            first_room = 1000
        room = first_room + MAX_COMMENTS * limit  # never split more than can be posted
        parts = split_markdown(self.transcript[:room], limit - _WRAPPER_ROOM - len(_CUT), first_limit=first_room)
        if len(parts) > MAX_COMMENTS + 1 or len(self.transcript) > room:
            parts = parts[:MAX_COMMENTS + 1]
            parts[-1] += _CUT
        if len(parts) == 1:
            return head + _details("Transcript", parts[0]), []
        if self.transcript_url:
            cut = parts[0] + f"\n… cut here: the rest is in [the full transcript]({self.transcript_url}).\n"
            return head + _details("Transcript (the beginning)", cut), []
        total = len(parts)
        body = head + _details(f"Transcript (part 1 of {total}, continued in the comments below)", parts[0])
        comments = [_details(f"Transcript (part {i} of {total})", part) for i, part in enumerate(parts[1:], 2)]
        return body, comments


def verification_section(v: Verification) -> str:
    """The body's "Verification" section: each `verify:` command of the last round with ✅/❌ and its
    duration, or one line saying the harness verified nothing."""
    if not v.configured:
        return ("**Verification:** nothing was verified by the harness. Add `verify:` to .github/decode.yml "
                "(e.g. your test command) to have every run's result checked before its pull request.")
    if not v.checks:
        return "**Verification:** the `verify:` commands did not run: the run stopped before the agent's answer."
    rounds = f"{v.rounds} round{'s' if v.rounds != 1 else ''}, {v.feedback} sent back to the agent"
    head = {"passed": "✅ passed", "failed": "❌ failed"}[v.verified]
    rows = [f"- {'✅' if c.passed else '❌'} {code_span(c.command)} ({c.duration_s:.1f}s)"
            + ("" if c.passed else f": {c.status}") for c in v.checks]
    stale = ["", "The run stopped after the last failure went back to the agent: its later changes are not "
                 "verified."] if v.stale else []
    return "\n".join([f"**Verification** ({head}; `verify:` in .github/decode.yml, {rounds})", "", *rows, *stale])
