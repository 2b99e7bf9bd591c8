"""A commit's changes as "create a tree" requests: text inline, other files by their blob sha, deletions as
`sha: null`, split by the bytes of contents one request carries."""

from __future__ import annotations

from bot.github.git_tree import inline_text, tree_parts
from bot.github.info import TreeEntry


def test_text_goes_inline_and_the_rest_by_sha():
    entries = (TreeEntry("a.py", "100644", b"x = 1\n", "a" * 40),
               TreeEntry("logo.png", "100644", b"\x89PNG\xff", "b" * 40), TreeEntry("zeros", "100644", b"\0\0", "c" * 40), TreeEntry("link", "120000", b"a.py", "d" * 40),
               TreeEntry("gone.txt", "100644", None))
    [part] = tree_parts(entries)
    assert part == [{"path": "a.py", "mode": "100644", "type": "blob", "content": "x = 1\n"},
                    {"path": "logo.png", "mode": "100644", "type": "blob", "sha": "b" * 40},
                    {"path": "zeros", "mode": "100644", "type": "blob", "sha": "c" * 40},
                    {"path": "link", "mode": "120000", "type": "blob", "content": "a.py"},
                    {"path": "gone.txt", "mode": "100644", "type": "blob", "sha": None}]
    assert inline_text("é\n".encode()) == "é\n" and inline_text(b"\xff") is None


def test_contents_over_the_budget_go_in_more_requests_each_within_it():
    entries = tuple(TreeEntry(f"f{i}.txt", "100644", b"y" * 400, "e" * 40) for i in range(10))
    parts = tree_parts(entries, budget=1000)
    assert [len(p) for p in parts] == [2, 2, 2, 2, 2]
    assert [e["path"] for p in parts for e in p] == [f"f{i}.txt" for i in range(10)]
