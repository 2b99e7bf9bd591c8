"""agentd's path, link, mode and LFS rules: one copy, which the sandbox and the host's check both run."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from bot.sandbox.agentd.paths import GITLINK_REASON, lfs_pointer, link_problem, mode_problem, path_problem

BOT = Path(__file__).resolve().parents[3] / "bot"


@pytest.mark.parametrize(("links", "escapes"), [
    ({"x": "../etc/passwd"}, True),
    ({"x": "/etc/passwd"}, True),
    ({"x": "docs/../README.md"}, False),
    ({"sub/up": "..", "x": "sub/up/sub/up/../../../etc/passwd"}, True),  # each link alone stays inside
    ({"sub/up": "..", "x": "sub/up/README.md"}, False),
    ({"d": "sub/up", "sub/up": "..", "x": "d/../../etc"}, True),  # a link to a directory that is a link
    ({"a": "b", "b": "c", "c": "..", "x": "a/x"}, True),  # a chain of links
    ({"Sub": "..", "x": "sub/../../etc"}, True),  # a case-insensitive checkout follows Sub for sub
    ({"x": "y", "y": "x"}, True),  # a loop
    ({"x": "sub/.GIT/config"}, True),
    ({"m": "missing/..", "x": "m/README.md"}, False),  # names the tree lacks are plain directories
])
def test_symlinks_are_resolved_against_the_resulting_tree(links: dict[str, str], escapes: bool) -> None:
    assert (link_problem("x", links) is not None) is escapes


@pytest.mark.parametrize(("path", "refused"), [
    ("src/app.py", False), (".github/workflows/ci.yml", False), ("a/.gitignore", False),
    ("", True), ("/etc/passwd", True), ("a/../../b", True), (".git/config", True), ("sub/.GIT/hooks/x", True),
    ("sub/git~1/config", True), ("sub/.git. /config", True),
])
def test_paths_inside_git_or_outside_the_tree_are_refused(path: str, refused: bool) -> None:
    assert (path_problem(path) is not None) is refused


def test_modes_git_does_not_carry_are_named() -> None:
    assert mode_problem("lib", "160000", {}) == GITLINK_REASON
    assert mode_problem("x", "100664", {}) == "unsupported file mode 100664"
    assert mode_problem("x", "120000", {"x": "../out"}) is not None
    assert [mode_problem("x", mode, {"x": "inside"}) for mode in ("100644", "100755", "120000", "000000")] == [None] * 4


def test_an_lfs_pointer_is_read_and_anything_else_is_not() -> None:
    oid = "4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393"
    pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize 12345\n".encode()
    assert lfs_pointer(pointer) == (oid, 12345)
    assert lfs_pointer(b"print('hi')\n") is None


def test_the_rules_are_defined_once_in_bot() -> None:
    """The host's check imports agentd's rules: no second definition anywhere in bot/ to drift from them."""
    rules = {"path_problem", "link_problem", "mode_problem", "lfs_pointer"}
    defined: dict[str, list[str]] = {name: [] for name in rules}
    for path in sorted(BOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name in rules:
                defined[node.name].append(str(path.relative_to(BOT)))
    assert defined == {name: ["sandbox/agentd/paths.py"] for name in rules}
