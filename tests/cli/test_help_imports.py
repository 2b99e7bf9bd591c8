"""`decode --help`, `decode --version` and a bad flag answer from the parser alone: no sandbox backend, no
pipeline, no model SDK is imported (they load when a command that needs them runs; issue 34)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("bot.sandbox", "bot.run", "bot.agent", "bot.model", "bot.workspace", "bot.github", "bot.server", "bot.eval",
         "anthropic", "github", "flask", "modal", "psycopg")
MAX_BOT_MODULES = 12  # the parser's own: bot.cli, bot.config (for --help's settings), bot.core's errors


def loaded(*argv: str, **env: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """`python -X importtime -m bot.cli ARGV` (with `env` added to the environment) and the modules it imported."""
    res = subprocess.run([sys.executable, "-X", "importtime", "-m", "bot.cli", *argv], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT), **env})
    return res, {line.split("|")[-1].strip() for line in res.stderr.splitlines() if line.startswith("import time:")}


@pytest.mark.parametrize("argv, status", [(("--help",), 0), (("--version",), 0), (("--bogus",), 2),
                                          (("run", "--bogus"), 2), (("eval", "--help"), 0)])
def test_help_version_and_a_bad_flag_load_no_backend_and_no_pipeline(argv: tuple[str, ...], status: int) -> None:
    res, modules = loaded(*argv)
    assert res.returncode == status, res.stderr[-2000:]
    assert "bot.cli" in modules and "argparse" in modules, "the report is read right"
    heavy = sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))
    assert heavy == [], f"decode {' '.join(argv)} loaded {heavy}"
    ours = sorted(m for m in modules if m == "bot" or m.startswith("bot."))
    assert len(ours) <= MAX_BOT_MODULES, ours


def test_a_command_still_loads_what_it_needs(tmp_path: Path) -> None:
    res, modules = loaded("cache", "list", DECODE_DATA_DIR=str(tmp_path / "data"))
    assert res.returncode == 0, res.stderr[-2000:]
    assert "bot.cli.cache" in modules and "bot.run.setup_cache" in modules
