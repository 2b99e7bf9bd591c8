"""bot/ type-checks: mypy (pinned in the `test` extra, configured in pyproject.toml's [tool.mypy]) finds no
error, and every `# type: ignore` that is left names its error code and says why on the same line."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IGNORE = re.compile(r"#\s*type:\s*ignore(?P<code>\[[a-z0-9-]+(?:,\s*[a-z0-9-]+)*\])?(?P<why>\s*#\s*\S.*)?")


def mypy(*args: str) -> subprocess.CompletedProcess[str]:
    """`python -m mypy` in the repository's root, with pyproject.toml's settings."""
    return subprocess.run([sys.executable, "-m", "mypy", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


def test_bot_type_checks() -> None:
    res = mypy()
    assert res.returncode == 0, res.stdout[-6000:] + res.stderr[-2000:]
    assert "Success: no issues found" in res.stdout


def test_a_type_error_fails_the_check(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def count(name: str) -> int:\n    return name\n\n\n"
                   "def loose(x: int) -> int:\n    return str(x)  # type: ignore\n")
    res = mypy(str(bad))
    assert res.returncode == 1
    assert "Incompatible return value type" in res.stdout and "[ignore-without-code]" in res.stdout, res.stdout


def unexplained_ignores(top: Path = ROOT / "bot") -> list[str]:
    """`path:line` of each `# type: ignore` without an error code, or without a `# why` after it."""
    found = []
    for path in sorted(top.rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if (m := IGNORE.search(line)) and not (m["code"] and m["why"]):
                found.append(f"{path.relative_to(top.parent)}:{number}: {line.strip()}")
    return found


def test_each_type_ignore_names_its_code_and_why(tmp_path: Path) -> None:
    assert unexplained_ignores() == []
    (tmp_path / "bot").mkdir()
    (tmp_path / "bot" / "a.py").write_text("x = f()  # type: ignore[misc]\ny = g()  # type: ignore[misc]  # g is "
                                           "untyped\nz = h()  # type: ignore\n")
    assert unexplained_ignores(tmp_path / "bot") == ["bot/a.py:1: x = f()  # type: ignore[misc]",
                                                     "bot/a.py:3: z = h()  # type: ignore"]
