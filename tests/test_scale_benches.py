"""The benches of issue 38 in their smoke mode (tiny sizes, seconds): each runs through the real paths (the fake
GitHub with PyGithub and git, the Flask app, SQLite and PostgreSQL), prints its rows with a ratio to the
baseline it measured in the same run, and says whether its target holds; the full sizes' figures are in
docs/scale.md."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("bench,rows", [
    ("publish_scale.py", [r"^\s+20\s+4\s+4\s+0\s+[\d.]+\s+\d+\s+[\d.]+\s+[\d.]+x$"]),  # 4 writes, none refused
    ("transcript_page.py", [r"^\s+60\s+page cold\s+[\d.]+\s+[\d.]+\s+[\d.]+x t", r"poll, one new turn",
                            r"a late page, ended"]),
    ("many_runs.py", [r"^sqlite\s+1,000\s+dashboard\s", r"^postgres\s+1,000\s+claim \+ finish\s",
                      r"^sqlite\s+1,000\s+decode runs\s"]),
])
def test_a_bench_runs_in_smoke_mode_and_prints_ratios_to_its_baseline(bench: str, rows: list[str]) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / bench), "--smoke"], capture_output=True, text=True,
                          timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith(("baseline", "latency")) and lines[-1].startswith("target:")
    for row in rows:
        assert any(re.search(row, line) for line in lines), (row, done.stdout)
