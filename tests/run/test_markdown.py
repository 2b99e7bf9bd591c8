"""`safe_prose`'s rule for model prose, case by case (docs/security.md, Model prose), and the cuts that must
never open a code span it kept. Every hostile form is also driven through the real job path in
tests/security/test_model_prose.py; here each one is pinned to what it becomes."""

from __future__ import annotations

import pytest

from bot.github.body import split_markdown
from bot.run.markdown import clip, home_of, safe_prose

HOME = "https://github.com/octo/calendar"


@pytest.mark.parametrize("repo, home", [
    ("https://github.com/octo/calendar.git", HOME), ("https://github.com/octo/calendar", HOME),
    ("https://GitHub.com/octo/calendar/", "https://github.com/octo/calendar"),
    ("http://127.0.0.1:8080/octo/calendar.git", "http://127.0.0.1:8080/octo/calendar"),
    ("/srv/repos/calendar", None), ("git@github.com:octo/calendar.git", None),
    ("https://x-access-token:t@github.com/octo/calendar.git", None), ("https://github.com/", None), ("", None),
])
def test_the_home_of_a_repository_is_its_web_address(repo, home) -> None:
    assert home_of(repo) == home


@pytest.mark.parametrize("text, shown", [
    ("![x](https://evil.example/p.png?d=S)", "x (image `https://evil.example/p.png?d=S`)"),
    ("![](https://evil.example/p.png)", "image `https://evil.example/p.png`"),
    (f"![shot]({HOME}/blob/main/shot.png)", f"[shot]({HOME}/blob/main/shot.png)"),
    ("[Approve](https://evil.example/login)", "Approve (`https://evil.example/login`)"),
    ("[https://evil.example](https://evil.example)", "`https://evil.example`"),
    (f"[PR]({HOME}/pull/2)", f"[PR]({HOME}/pull/2)"),
    (f"[up]({HOME}/../../mallory/repo)", f"up (`{HOME}/../../mallory/repo`)"),
    (f"[pct]({HOME}/%2e%2e/x)", f"pct (`{HOME}/%2e%2e/x`)"),
    ("[elsewhere](https://github.com/octo/calendar-evil)", "elsewhere (`https://github.com/octo/calendar-evil`)"),
    ("[rel](/mallory/repo)", "rel (`/mallory/repo`)"),
    (f"[t]({HOME}/a ![i](https://e.example/p))", f"t (`{HOME}/a ![i](https://e.example/p)`)"),
    (f"[t]({HOME}/a \"title\")", f"t (`{HOME}/a \"title\"`)"),
    (f"[t](<{HOME}/a>)", f"[t]({HOME}/a)"),
    ("```\nleft open", "```\nleft open\n```\n"),
    ("[x][1]\n\n[1]: https://evil.example/r", "x\n\n[1]\\: `https://evil.example/r`"),
    ("<img src=x>", "&lt;img src=x>"),
    ("see https://evil.example/a, then", "see `https://evil.example/a`, then"),
    (f"see {HOME}/issues/1.", f"see {HOME}/issues/1."),
    ("www.evil.example and ftp://evil.example/f", "`www.evil.example` and `ftp://evil.example/f`"),
    ("mail a@evil.example", "mail a@\u2060evil.example"),
    ("`![x](https://evil.example/p.png)`", "`![x](https://evil.example/p.png)`"),
    ("```\n![x](https://evil.example/p.png)\n```", "```\n![x](https://evil.example/p.png)\n```"),
    ("one `tick\n![x](https://e.example/p)", "one \\`tick\nx (image `https://e.example/p`)"),
    ("[x](https://evil.example/`a)`", "x (``https://evil.example/`a``)\\`"),
    ("`a\r\r![x](https://e.example/p)\r\r`", "\\`a\n\nx (image `https://e.example/p`)\n\n\\`"),
    ("a\u2028```\n![x](https://e.example/p)\n```", "a\u2028\\`\\`\\`\nx (image `https://e.example/p`)\n```\n```\n"),
    ("  ```\n![x](https://e.example/p)\n  ```", "  \\`\\`\\`\nx (image `https://e.example/p`)\n  \\`\\`\\`"),
])
def test_images_and_foreign_links_become_text_and_code_stays(text, shown) -> None:
    assert safe_prose(text, HOME) == shown


def test_without_a_home_no_link_is_kept() -> None:
    assert safe_prose(f"[PR]({HOME}/pull/2) {HOME}") == f"PR (`{HOME}/pull/2`) `{HOME}`"


def test_a_code_span_holding_a_pipe_is_kept_unless_a_table_may_split_it() -> None:
    assert safe_prose("run `a | b` here") == "run `a | b` here"
    table = "| a | b |\n|---|---|\n| `c | ![i](https://e.example/p) | d` |"
    assert "![" not in safe_prose(table)
    assert "![" not in safe_prose("\n".join("> " + line for line in table.split("\n")))


def test_inline_text_has_no_block_a_list_marker_before_it_could_end() -> None:
    assert safe_prose("```\n![x](https://e.example/p)\n```", inline=True) == \
        "``` ![x](https://e.example/p) ```"  # one code span on one line: GitHub's reading too, after "- "
    assert safe_prose("```\n![x](https://e.example/p)", inline=True) == "\\`\\`\\` x (image `https://e.example/p`)"


def test_a_cut_never_opens_a_kept_code_span() -> None:
    prose = safe_prose("first line\n`![x](https://e.example/p)` second")
    assert clip(prose, len(prose) - 3) == "first line" and clip(prose, 5) == ""
    line = "x" * 280 + " `" + "a" * 10 + " ![i](https://e.example/p) " + "b" * 30 + "` tail\n"
    for part in split_markdown(line, 320):
        assert part.count("`") % 2 == 0, part  # each part closes the span it opens
