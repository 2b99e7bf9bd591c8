"""A transcript as safe HTML: `render_markdown`, then markdown-it, then nh3 with a short allow-list.

A transcript holds untrusted text (issue bodies, tool output, whatever the model wrote), so the HTML
keeps only formatting tags, links to http(s) and mailto (the model's prose links to the run's repository
only: `safe_prose`), and `language-*` classes on code; no script, style, event handler, image or iframe
survives (https://nh3.readthedocs.io/). The page's Content-Security-Policy is the second wall.
"""

from __future__ import annotations

import re
import nh3
from markdown_it import MarkdownIt

MAX_BLOCK_CHARS = 20_000  # one tool output this long is shown head and tail, like the PR's transcript
TAGS = {"a", "p", "pre", "code", "em", "strong", "del", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li",
        "blockquote", "table", "thead", "tbody", "tr", "th", "td", "details", "summary", "hr", "br"}
ATTRIBUTES = {"a": {"href", "title"}, "code": {"class"}}
SCHEMES = {"http", "https", "mailto"}
LANGUAGE = re.compile(r"language-[A-Za-z0-9_+#.-]+")

_md = MarkdownIt("commonmark", {"html": True, "linkify": False}).enable("table").enable("strikethrough")


def markdown_html(markdown: str) -> str:
    """A transcript's Markdown (or a page of it) as sanitized HTML."""
    return safe_html(_md.render(markdown))


def safe_html(html: str) -> str:
    """`html` with everything but the allow-listed formatting removed."""
    return nh3.clean(html, tags=TAGS, attributes=ATTRIBUTES, attribute_filter=_languages_only, url_schemes=SCHEMES,
                     link_rel="noopener noreferrer nofollow", strip_comments=True,
                     clean_content_tags={"script", "style"})


def _languages_only(tag: str, attribute: str, value: str) -> str | None:
    """A code block's `class` keeps its `language-*` names only: any other class would borrow the page's own
    styles (a `badge failed` in a model's prose)."""
    if tag != "code" or attribute != "class":
        return value
    kept = [name for name in value.split() if LANGUAGE.fullmatch(name)]
    return " ".join(kept) or None
