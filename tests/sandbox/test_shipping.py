"""agentd ships as one zipapp of a standard-library package that any Python from 3.8 on can run.

The sandbox conformance suite (test_conformance.py) runs the shipped archive on
every backend; this file checks what it is made of, and runs it on the oldest
Python this machine has.
"""

from __future__ import annotations

import ast
import glob
import io
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from bot.sandbox.shipping import PACKAGE, agentd_file, zipapp_bytes

MODULES = sorted(PACKAGE.glob("*.py"))
OLDEST = (3, 8)  # agentd's oldest supported Python (bot/sandbox/agentd/__init__.py)
# Methods the standard library gained after 3.8 that agentd's kind of code reaches for (os.pidfd_open, 3.9, is
# called only where an AttributeError falls back to polling).
NEWER_THAN_38 = {"removeprefix", "removesuffix", "is_relative_to", "with_stem", "pairwise", "bit_count",
                 "waitstatus_to_exitcode"}


def test_the_package_has_one_module_per_job() -> None:
    assert {p.stem for p in MODULES} >= {"__init__", "rpc", "processes", "files", "handback", "relay", "paths"}


@pytest.mark.parametrize("module", MODULES, ids=lambda p: p.name)
def test_every_module_parses_as_python_38(module: Path) -> None:
    ast.parse(module.read_text(), filename=str(module), feature_version=(3, 8))


@pytest.mark.parametrize("module", MODULES, ids=lambda p: p.name)
def test_every_module_imports_the_standard_library_and_its_siblings_only(module: Path) -> None:
    tree = ast.parse(module.read_text())
    absolute = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    absolute |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module != "__future__"}
    assert absolute <= sys.stdlib_module_names


@pytest.mark.parametrize("module", [p for p in MODULES if p.name != "__init__.py"], ids=lambda p: p.name)
def test_annotations_stay_strings_and_no_string_method_is_newer_than_38(module: Path) -> None:
    """`str | None` and `dict[str, int]` fail on 3.8 when evaluated: every module defers them (PEP 563)."""
    tree = ast.parse(module.read_text())
    assert any(isinstance(node, ast.ImportFrom) and node.module == "__future__"
               and [a.name for a in node.names] == ["annotations"] for node in tree.body)
    newer = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)} & NEWER_THAN_38
    assert not newer, f"{module.name} calls {newer}, new in Python 3.9"


def test_the_zipapp_holds_the_package_and_a_main_and_is_the_same_every_build() -> None:
    with zipfile.ZipFile(io.BytesIO(zipapp_bytes())) as archive:
        names = archive.namelist()
        assert archive.read("__main__.py").decode().count("from agentd.rpc import main") == 1
    assert names == ["__main__.py", *(f"agentd/{p.name}" for p in MODULES)]
    assert agentd_file().read_bytes() == zipapp_bytes()
    zipapp_bytes.cache_clear()
    assert zipapp_bytes() == agentd_file().read_bytes()


def test_the_host_file_comes_back_when_a_temp_cleaner_removed_it() -> None:
    first = agentd_file()
    shutil.rmtree(first.parent)
    again = agentd_file()
    assert again.read_bytes() == zipapp_bytes() and again.parent.stat().st_mode & 0o077 == 0


def pythons() -> dict[tuple[int, int], str]:
    """Every Python 3 interpreter on this machine (python3.N on PATH, pyenv's versions, this one) by version."""
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    names = {f"python3.{minor}" for minor in range(6, 20)}
    candidates = [sys.executable, *filter(None, map(shutil.which, sorted(names))),
                  *sorted(glob.glob(f"{root}/versions/3.*/bin/python3"))]
    found: dict[tuple[int, int], str] = {}
    for candidate in candidates:
        res = subprocess.run([candidate, "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True,
                             text=True)
        if res.returncode == 0:
            major, minor = map(int, res.stdout.split())
            found.setdefault((major, minor), candidate)
    return found


def test_the_zipapp_serves_on_the_oldest_supported_python_here(tmp_path: Path) -> None:
    """On 3.8 where this machine has it (pyenv's, on the project's machines); else on the oldest from 3.8 on that
    it has, never below what the sandbox images' python3 (Debian's 3.11) gives: no skip. The syntax and annotation
    checks above hold the promise for 3.8 where no 3.8 is installed."""
    found = pythons()
    supported = [version for version in found if version >= OLDEST]
    assert supported, "this interpreter at least"
    python = found[min(supported)]
    (tmp_path / "a.txt").write_text("needle\n")
    requests = [{"id": 1, "op": "ping"}, {"id": 2, "op": "exec", "command": "echo hi; sleep 0.1 &"},
                {"id": 3, "op": "grep", "pattern": "needle"}, {"id": 4, "op": "read", "path": "../etc/passwd"}]
    lines = "".join(json.dumps(r) + "\n" for r in requests).encode()
    done = subprocess.run([python, "-I", str(agentd_file()), str(tmp_path)], input=lines, capture_output=True,
                          timeout=60, env={"PATH": os.defpath})
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert done.returncode == 0, done.stderr
    assert [a["ok"] for a in answers] == [True, True, True, False]
    assert answers[1]["output"] == "hi\n" and answers[2]["matches"] == ["a.txt:1:needle"]
    assert "outside the workspace" in answers[3]["error"]
