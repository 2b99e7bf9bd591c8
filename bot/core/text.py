"""Untrusted text as a human reader sees it rendered.

Everything a GitHub user wrote (titles, bodies, comments, file names, commit subjects) may hide text from
the people reading the rendered page: HTML comments, invisible and bidi control characters, hidden
markup, link reference definitions. `clean` removes what a reader would not see, so what reaches the
agent, a commit or a pull request is what a maintainer could have read. Pure functions over strings.
"""

from __future__ import annotations

import re
import unicodedata

from bot.core.utf8 import utf8_safe

# Every Default_Ignorable_Code_Point (Unicode DerivedCoreProperties.txt,
# https://www.unicode.org/Public/UCD/latest/ucd/DerivedCoreProperties.txt): zero-width and
# bidi controls, variation selectors, fillers, tags... Format (Cf) characters and control
# characters other than tab and newline go too (`visible`), so no text hides in what renders as nothing.
_IGNORABLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)
# An HTML comment, including the abrupt `<!-->` / `<!--->` forms and one left open at the end.
_HTML_COMMENT = re.compile(r"<!--(?:-?>|.*?(?:--!?>|\Z))", re.DOTALL)
# A Markdown link reference definition, which renders as nothing: `[label]: url "title"`, with the
# destination in <> or bare, the title in "", '' or (), each may be on the next line
# (https://spec.commonmark.org/0.31.2/#link-reference-definitions). Also `[//]: # (comment)`.
_LINK_DEFINITION = re.compile(
    r"""^ {0,3}\[(?:[^\]\\]|\\.){1,999}\]:[ \t]*\n?[ \t]*(?:<[^<>\n]*>|\S+)"""
    r"""(?:(?:[ \t]+|[ \t]*\n[ \t]*)(?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|\((?:[^()\\]|\\.)*\)))?[ \t]*$""",
    re.MULTILINE,
)
_TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9-]*)((?:[^>\"']|\"[^\"]*\"|'[^']*')*)>")
_HIDING_ATTR = re.compile(
    r"""(?:^|\s)hidden(?:\s|=|/|$)"""
    r"""|style\s*=\s*["']?[^"'>]*(?:display\s*:\s*none|visibility\s*:\s*hidden)"""
    r"""|type\s*=\s*["']?hidden""",
    re.IGNORECASE,
)
_NEVER_RENDERED = frozenset({"script", "style", "template", "noscript", "iframe", "object"})
_VOID = frozenset({"area", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"})


def clean(text: str | None) -> str:
    """`text` as a human sees it rendered: no HTML comments, invisible characters or hidden markup."""
    if not text:
        return ""
    text = utf8_safe(text).replace("\r\n", "\n").replace("\r", "\n").replace("\u2028", "\n").replace("\u2029", "\n")
    text = visible(text)
    text = _HTML_COMMENT.sub("", text)
    text = _LINK_DEFINITION.sub("", text)
    text = _strip_hidden_elements(text)
    lines = [line.rstrip() for line in text.split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip("\n")


def one_line(text: str | None) -> str:
    """`clean(text)` on one line, whitespace runs collapsed: for names (files, branches, commit subjects)."""
    return " ".join(clean(text).split())


def visible(text: str) -> str:
    """`text` without invisible characters: Default_Ignorable code points, format and control characters
    (tab and newline kept)."""
    text = _IGNORABLE.sub("", text)
    return "".join(c for c in text if c in "\t\n" or unicodedata.category(c) not in ("Cf", "Cc"))


def _strip_hidden_elements(text: str) -> str:
    """Remove elements (with their content) that a rendered page never shows."""
    out: list[str] = []
    pos = 0
    for tag in _TAG.finditer(text):
        if tag.start() < pos:
            continue
        closing, name, attrs = tag.group(1), tag.group(2).lower(), tag.group(3)
        if closing or not (name in _NEVER_RENDERED or _HIDING_ATTR.search(attrs)):
            continue
        out.append(text[pos:tag.start()])
        if name in _VOID or attrs.rstrip().endswith("/"):
            pos = tag.end()
        else:
            pos = _matching_close(text, name, tag.end())
    out.append(text[pos:])
    return "".join(out)


def _matching_close(text: str, name: str, start: int) -> int:
    """Index just past the `</name>` closing the element opened before `start`; end of text if none."""
    depth = 1
    pattern = re.compile(rf"<(/?){re.escape(name)}\b[^>]*>", re.IGNORECASE)
    for m in pattern.finditer(text, start):
        depth += -1 if m.group(1) else 1
        if depth == 0:
            return m.end()
    return len(text)
