"""Text made safe for Markdown on GitHub and for commit messages: code fences and spans no backtick run can
close, and model-written prose that cannot ping people, close issues or add trailers."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

_MENTION = re.compile(r"(?<![\w/])@(?=[A-Za-z0-9])")
_CLOSING_REF = re.compile(r"(?i)\b((?:close[sd]?|fix(?:e[sd])?|resolve[sd]?):?\s+[\w.\-/]*#)(?=\d)")
# The same keywords before a full issue or pull request URL, which GitHub acts on too
# (https://docs.github.com/en/issues/tracking-your-work-with-issues/using-issues/linking-a-pull-request-to-an-issue).
_CLOSING_URL = re.compile(r"(?i)\b(close[sd]?|fix(?:e[sd])?|resolve[sd]?)(?=:?\s+<?https?://\S+/(?:issues|pull)/\d)")
# A line git (and GitHub) would read as a trailer, `Token: value` (Co-authored-by, Signed-off-by, Fixes...).
_TRAILER = re.compile(r"^[ \t]*[A-Za-z0-9][A-Za-z0-9_-]*[ \t]*:(?!//)[ \t]*\S.*$\n?", re.MULTILINE)
_TAG = re.compile(r"<(?=[A-Za-z/!?])")
_EMAIL_AT = re.compile(r"(?<=[\w.+-])@(?=[\w-]+\.[\w-])")
# What GitHub links without brackets (GFM's extended autolinks): a scheme's address or www.
_BARE_URL = re.compile(r"(?i)((?:(?:https?|ftp)://|www\.)[^\s<>`]+)")
_STRAY_TICK = re.compile(r"(\\*)`")  # a backtick outside the code spans kept: escaped, so none pairs with ours
# A table's delimiter row: where one may be, a `|` in a code span splits table cells first (GFM tables).
_TABLE_ROW = re.compile(r"^(?=[^\n]*-)(?=[^\n]*\|)[ \t>|:-]+$", re.MULTILINE)  # in a quote too
_SYNTAX = re.compile(r"(?<=!)\[|(?<=\])[(\[:]")  # what is left of an image, a link or a reference definition
# A fence that opens at a line's first column: at top level wherever the text lands, so GitHub sees it too.
_FENCE_OPEN = re.compile(r"^(`{3,}|~{3,})(.*)$")


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


def home_of(repo: str | None) -> str | None:
    """The web address of a repository (`https://github.com/OWNER/NAME`) from its clone URL or web URL; None
    for a local path or anything else that is not an http(s) URL. Model prose keeps links to this only."""
    try:
        url = urlsplit((repo or "").strip())
    except ValueError:
        return None
    if url.scheme not in ("http", "https") or not url.hostname or "@" in url.netloc or url.query or url.fragment:
        return None
    path = url.path.rstrip("/").removesuffix(".git").rstrip("/")
    return f"{url.scheme}://{url.netloc.lower()}{path}" if path.count("/") >= 2 else None


def safe_prose(text: str, home: str | None = None, *, inline: bool = False) -> str:
    """Model-written Markdown for GitHub and the transcript page (docs/security.md, Model prose): outside code,
    no @pings, no issue-closing references, no HTML tags, no images (each becomes a link to `home` or its
    address as text) and no links but to `home` (the repository's web address, `home_of`): any other link
    becomes its text and its target as code, a bare address becomes code. Code is kept as written: fenced
    blocks whose fence starts a line at its first column, and code spans within one line (`inline` puts all
    the text on one line, for a caller that writes it after a list marker or a quote)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")  # Markdown's line ends, and no others (not U+2028)
    if inline:
        text = re.sub(r"[ \t]*\n+[ \t]*", " ", text)
    pipes = "|" if _TABLE_ROW.search(text) else ""
    out, fence_end = [], None
    for line in re.findall(r"[^\n]*\n|[^\n]+$", text):
        bare = line.rstrip("\n")
        if fence_end is not None:
            out.append(line)
            if fence_end.match(bare):
                fence_end = None
        elif not inline and (opened := _FENCE_OPEN.match(bare)) and \
                not (opened.group(1)[0] == "`" and "`" in opened.group(2)):
            out.append(line)
            marker = opened.group(1)
            fence_end = re.compile(rf"^[ \t]{{0,3}}{re.escape(marker[0])}{{{len(marker)},}}[ \t]*$")
        else:
            out.append(_inline(bare, home, pipes) + line[len(bare):])
    if fence_end is not None:  # closed here, so that what follows the prose is not taken into its code
        out.append(("" if out[-1].endswith("\n") else "\n") + marker + "\n")
    return "".join(out)


def _inline(line: str, home: str | None, pipes: str = "") -> str:
    """One line of prose made safe: code spans kept (not one holding a `pipes` character, which may split
    it as a table's cells), links and images judged, the rest `_neutralize`d."""
    out: list[str] = []
    start = i = 0
    while i < len(line):
        if line[i] == "`":
            end = _span_end(line, i)
            if end is not None and not (pipes and pipes in line[i:end]) and (i == 0 or line[i - 1] != "\\"):
                out += [_neutralize(line[start:i], home), line[i:end]]
                start = i = end
                continue
            i += len(line) - len(line[i:].lstrip("`"))
            continue
        if line[i] == "[" or line.startswith("![", i):
            found = _link_at(line, i, home, pipes)
            if found is not None:
                end, said = found
                out += [_neutralize(line[start:i], home), said]
                start = i = end
                continue
        i += 1
    return "".join(out + [_neutralize(line[start:], home)])


def clip(prose: str, limit: int) -> str:
    """Markdown made by `safe_prose` (or `fence`) cut to at most `limit` characters at a line's end: no code
    span it kept spans lines, so the cut opens none (a cut fence only shows more as code); "" when even the
    first line is longer."""
    if len(prose) <= limit:
        return prose
    cut = prose.rfind("\n", 0, limit + 1)
    return prose[:cut] if cut > 0 else ""


def span_edges(line: str) -> list[tuple[int, int, str]]:
    """The code spans of one line as (start, end, backtick run): where a cut must close and reopen one."""
    found, i = [], 0
    while (i := line.find("`", i)) >= 0:
        end = _span_end(line, i)
        run = "`" * (len(line) - i - len(line[i:].lstrip("`")))
        if end is None:
            i += len(run)
            continue
        found.append((i, end, run))
        i = end
    return found


def _span_end(line: str, at: int) -> int | None:
    """Where the code span opened by the backtick run at `at` ends (after its closing run of the same length,
    on this line), else None."""
    run = len(line) - at - len(line[at:].lstrip("`"))
    closing = re.compile(rf"(?<!`)`{{{run}}}(?!`)").search(line, at + run)
    return closing.end() if closing else None


def _link_at(line: str, at: int, home: str | None, pipes: str) -> tuple[int, str] | None:
    """The inline link or image (`[text](target)`, `![alt](target)`) or reference link (`[text][label]`)
    starting at `at`: (where it ends, what stands for it), else None."""
    image = line[at] == "!"
    label_end = _closing(line, at + 1 + image, "[", "]")
    if label_end is None or label_end + 1 >= len(line) or line[label_end + 1] not in "([":
        return None
    label = line[at + 1 + image:label_end].strip()
    said = _inline(label, home, pipes)
    if line[label_end + 1] == "[":  # a reference: its definition is neutralized wherever it is
        end = _closing(line, label_end + 2, "[", "]")
        return None if end is None else (end + 1, said)
    end = _closing(line, label_end + 2, "(", ")", spans=False)
    if end is None:
        return None
    inside = line[label_end + 2:end].strip()
    target = inside[1:inside.find(">")] if inside.startswith("<") and ">" in inside else (inside.split() or [""])[0]
    if _at_home(target, home) and inside in (target, f"<{target}>"):  # a title or more: GitHub may see no link
        return end + 1, f"[{said}]({target})"
    target = target if inside in (target, f"<{target}>") else inside
    shown = code_span(target) if target else ""
    kind = "image " if image else ""
    if not said or label == target:
        return end + 1, f"{kind}{shown}".strip()
    return end + 1, f"{said} ({kind}{shown})" if shown else said


def _closing(line: str, at: int, opening: str, closing: str, *, spans: bool = True) -> int | None:
    """The index of the `closing` bracket that balances the text from `at` (one `opening` already open),
    skipping backslash escapes and (with `spans`: in a link's text, not in its target) code spans; None when
    the line ends first."""
    depth, i = 1, at
    while i < len(line):
        char = line[i]
        if char == "\\":
            i += 2
            continue
        if spans and char == "`" and (end := _span_end(line, i)) is not None:
            i = end
            continue
        depth += (char == opening) - (char == closing)
        if depth == 0:
            return i
        i += 1
    return None


def _at_home(target: str, home: str | None) -> bool:
    """Whether `target` is an absolute address inside the repository's `home` (same scheme and host, a path
    under it, no dot segments, escapes or credentials that could lead elsewhere)."""
    if not home or not target or any(c in target for c in "\\%@ \t\"'<>`") or any(ord(c) < 32 for c in target):
        return False
    try:
        url, base = urlsplit(target), urlsplit(home)
    except ValueError:
        return False
    segments = url.path.split("/")
    if "." in segments or ".." in segments or "//" in url.path:
        return False
    path = url.path.lower()
    return (url.scheme.lower(), url.netloc.lower()) == (base.scheme, base.netloc) and \
        (path == base.path.lower() or path.startswith(base.path.lower() + "/"))


def safe_commit_text(text: str, *, subject: bool = False) -> str:
    """Model- or user-written text for a commit message: no trailer lines (the harness adds its own
    co-author trailer after this; a `subject` line is never read as one, so it keeps its text), no
    issue-closing references and no @pings, code spans included: GitHub reads a commit message as plain text."""
    text = text if subject else _TRAILER.sub("", text)
    text = _MENTION.sub("@\u2060", text)
    text = _CLOSING_URL.sub(lambda m: m.group(1) + "\u2060", text)
    return _CLOSING_REF.sub(lambda m: m.group(1) + "\u2060", text)


def _neutralize(text: str, home: str | None) -> str:
    """Prose outside code and links: no pings, closing references, HTML tags, leftover link or image syntax
    (escaped, so it shows as typed), mail autolinks, or bare addresses but those inside `home` (code)."""
    text = _CLOSING_URL.sub(lambda m: m.group(1) + "\u2060", text)
    text = _CLOSING_REF.sub(lambda m: m.group(1) + "\u2060", text)
    parts = _BARE_URL.split(text)
    for i, part in enumerate(parts):
        if i % 2:
            url = part.rstrip(".,:;!?*_~'\")]")
            parts[i] = (url if _at_home(url, home) else code_span(url)) + part[len(url):]
        else:
            part = _EMAIL_AT.sub("@\u2060", _MENTION.sub("@\u2060", part))
            part = _STRAY_TICK.sub(lambda m: m.group(0) if len(m.group(1)) % 2 else "\\" + m.group(0), part)
            parts[i] = _TAG.sub("&lt;", _SYNTAX.sub(lambda m: "\\" + m.group(0), part))
    return "".join(parts)
