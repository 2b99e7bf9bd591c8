"""`decode eval --attempts N`: each task runs as N attempts (bot/run/attempts.py), every attempt's result is
checked, and the verify-picked score (what the bot would publish) stands beside pass@N (any attempt resolved
it), through the console script and the fake Anthropic API with one scripted session per attempt."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.conftest import make_repo
from tests.eval.test_eval import ROOT, results
from tests.fakes.anthropic_api import FakeAnthropic
from tests.support.cli import DECODE

TASK = "add(2, 3) returns -1: make it add."
SMALL_WRONG = [[{"type": "tool_use", "name": "edit", "input": {"path": "calc.py", "old_string": "a - b",
                                                               "new_string": "a * b"}}], "Fixed."]
LARGE_RIGHT = [[{"type": "tool_use", "name": "write", "input": {
    "path": "calc.py", "content": "".join(f"# {n}\n" for n in range(5)) + "def add(a, b):\n    return a + b\n"}}],
    "Fixed, with notes."]
NOTHING = ["I changed nothing."]


def test_attempts_give_the_picked_score_and_pass_at_n_side_by_side(tmp_path: Path):
    repo = make_repo(tmp_path / "calc", {"calc.py": "def add(a, b):\n    return a - b\n"})
    task = {"id": "add", "repo": str(repo), "base": "main", "task": TASK,
            "check": "python3 -c 'from calc import add; assert add(2, 3) == 5'"}
    (tmp_path / "tasks.jsonl").write_text(json.dumps(task) + "\n")
    with FakeAnthropic() as fake:
        fake.sessions([(TASK, s) for s in (SMALL_WRONG, LARGE_RIGHT, NOTHING)])
        env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT),
               "ANTHROPIC_API_KEY": fake.api_key, "ANTHROPIC_BASE_URL": fake.url, "SANDBOX_MODE": "local",
               "DECODE_DATA_DIR": str(tmp_path / "data")}
        done = subprocess.run([DECODE, "eval", "tasks.jsonl", "--out", "out", "--attempts", "3"], env=env,
                              cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    # no verify: the fewest changed lines is picked, and it is the wrong one; another attempt was right
    assert "attempts 3: verify-picked 0 of 1, pass@3 1 of 1 (100%)" in done.stdout
    found = results(tmp_path / "out")["add"]
    assert (found["status"], found["attempts"], found["pass_at_n"]) == ("unresolved", 3, True)
    assert len(fake.requests) == 5  # every attempt ran (two turns, two turns, one)
    assert len(list((tmp_path / "out" / "checks" / "add").glob("result-*"))) == 2  # each committed one checked
