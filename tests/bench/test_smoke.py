"""Every bench in bench/ runs, at tiny sizes, so a broken bench fails the build instead of rotting unseen
until the next time someone measures (bench/webhook_ack.py crashed for a whole round). Only that each one runs
to the end and prints its figures is checked: the figures themselves mean nothing at these sizes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
# bench -> its smoke arguments, and a word its last lines print when it ran through.
SMOKE = {
    "action_install.py": (["--rounds", "1", "--pip-rounds", "0"], "target"),
    "attempts.py": (["--smoke"], "ratio"),
    "harness_overhead.py": (["--turns", "3", "--rounds", "1"], "harness overhead per turn"),
    "mcp_call.py": (["--n", "3", "--modes", "local,bwrap,docker,modal", "--start-rounds", "1", "--many", "2"],
                    "x one after the other"),
    "mirror.py": (["--files", "10", "--rounds", "1"], "second run"),
    "prepare.py": (["--mb", "1", "--commits", "2", "--rounds", "1"], "whole prepare"),
    "sandbox_overhead.py": (["--n", "3", "--modes", "local,bwrap,docker", "--failing", "3", "--files", "10"],
                            "docker"),
    "time_to_first_request.py": (["--mb", "1", "--commits", "2", "--rounds", "1", "--files", "10"], "warm pool"),
    "webhook_ack.py": (["--rate", "20", "--seconds", "0.5", "--peak-seconds", "0.5", "--connections", "2"],
                       "jobs stored durably"),
    "eval/build.py": (["{tmp}/eval"], "TASKS.jsonl"),
}

# Benches whose smoke run is tested elsewhere, with their rows checked: the file that runs each.
ELSEWHERE = {name: "tests/test_scale_benches.py" for name in ("publish_scale.py", "transcript_page.py", "many_runs.py")}


def test_every_bench_has_a_smoke_run() -> None:
    benches = {str(p.relative_to(BENCH)) for p in BENCH.rglob("*.py") if not p.name.startswith("_")}  # _: helpers
    assert benches == set(SMOKE) | set(ELSEWHERE), "give each bench in bench/ its smoke arguments in SMOKE"
    assert not set(SMOKE) & set(ELSEWHERE)


@pytest.mark.docker
@pytest.mark.bwrap
@pytest.mark.parametrize("bench", sorted(SMOKE))
def test_the_bench_runs_at_tiny_sizes(bench: str, tmp_path: Path) -> None:
    args, last_word = SMOKE[bench]
    res = subprocess.run([sys.executable, str(BENCH / bench), *(a.format(tmp=tmp_path) for a in args)],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "DECODE_DATA_DIR": str(tmp_path / "data")})
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    assert last_word in res.stdout, res.stdout[-2000:]
