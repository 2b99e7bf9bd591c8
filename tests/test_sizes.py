"""The size limits of bot/ (docs/style: modules <= 450 lines, functions <= 70): a module or function that
grows past its limit fails here, naming it, so a split is made when the code grows rather than after."""

from __future__ import annotations

import ast
from pathlib import Path

BOT = Path(__file__).resolve().parents[1] / "bot"
MODULE_LINES = 450
FUNCTION_LINES = 70


def too_long(top: Path = BOT) -> list[str]:
    """Each module under `top` over MODULE_LINES lines and each function or method over FUNCTION_LINES (from
    its `def` to its last line, docstring included), as `path: name (N lines)`."""
    found = []
    for path in sorted(top.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        where = path.relative_to(top.parent)
        if (lines := len(source.splitlines())) > MODULE_LINES:
            found.append(f"{where}: {lines} lines (limit {MODULE_LINES}): split it by concept")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > FUNCTION_LINES:
                    found.append(f"{where}:{node.lineno} {node.name}: {length} lines (limit {FUNCTION_LINES})")
    return found


def test_bot_modules_and_functions_stay_within_the_limits() -> None:
    assert len(list(BOT.rglob("*.py"))) > 100, "the walk reads the real tree"
    over = too_long()
    assert over == [], "over the size limits:\n" + "\n".join(over)


def test_a_module_or_function_over_the_limit_is_named(tmp_path: Path) -> None:
    top = tmp_path / "bot"
    top.mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(FUNCTION_LINES - 1))
    (top / "long_function.py").write_text(f"def fits():\n{body}\n\ndef over():\n{body}    return 0\n")
    (top / "long_module.py").write_text("x = 1\n" * (MODULE_LINES + 1))
    assert too_long(top) == [f"bot/long_function.py:{FUNCTION_LINES + 3} over: {FUNCTION_LINES + 1} lines "
                             f"(limit {FUNCTION_LINES})",
                             f"bot/long_module.py: {MODULE_LINES + 1} lines (limit {MODULE_LINES}): split it by "
                             "concept"]
