"""`decode eval` holds a task's repository to the pipeline's own checks, end to end through the console script
and a real bwrap sandbox: decode.yml is the task's base's for the check on the result too (the agent's own
decode.yml would choose the setup, network and image of what judges it), such a result is marked, and a
base whose allow_cidrs goes past DECODE_ALLOW_CIDRS_MAX errors before any sandbox."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import make_repo
from tests.eval.test_eval import decode_eval, results
from tests.sandbox.conftest import require

MARK = "agent-setup-ran"
REWRITE_CONFIG = [  # fixes the bug, and gives the check that judges it a setup of its own
    [{"type": "tool_use", "name": "write", "input": {"path": "fixed.txt", "content": "yes\n"}}],
    [{"type": "tool_use", "name": "write", "input": {
        "path": ".github/decode.yml", "content": f"setup:\n  - echo {MARK}\nnetwork: true\n"}}],
    [{"type": "text", "text": "Fixed."}],
]


def task_file(tmp_path: Path, files: dict[str, str], session: list) -> Path:
    """A one-task file on a fresh repository, and the scripted session the task picks."""
    repo = make_repo(tmp_path / "repo", files)
    (tmp_path / "sessions.json").write_text(json.dumps({"sessions": [{"when": "make fixed.txt", "turns": session}]}))
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps({"id": "t", "repo": str(repo), "base": "main", "task": "Please make fixed.txt.",
                                "check": "test -f fixed.txt"}) + "\n")
    return path


@pytest.mark.bwrap
def test_the_check_on_a_result_reads_decode_yml_from_the_base_and_the_result_is_marked(tmp_path):
    require("bwrap")
    tasks = task_file(tmp_path, {"README.md": "# r\n", ".github/decode.yml": "setup:\n  - echo base-setup\n"},
                      REWRITE_CONFIG)
    done = decode_eval(tmp_path, str(tasks), "--out", "out", DECODE_MODEL=f"scripted:{tmp_path / 'sessions.json'}")
    assert done.returncode == 0, done.stderr[-3000:]
    log = (tmp_path / "out" / "checks" / "t" / "result" / "transcript.jsonl").read_text()
    assert "base-setup" in log, "the base's setup ran before the check on the result"
    assert MARK not in log, "the agent's decode.yml chose nothing of the check that judged it"
    found = results(tmp_path / "out")["t"]
    assert found["status"] == "resolved" and found["changes_decode_yml"] is True, found
    assert "1 result(s) change .github/decode.yml, checked under the base's: t" in done.stdout.splitlines()


@pytest.mark.bwrap
def test_a_base_whose_allow_cidrs_passes_the_ceiling_errors_before_any_sandbox(tmp_path):
    require("bwrap")
    tasks = task_file(tmp_path, {"README.md": "# r\n", ".github/decode.yml": "setup:\n  - echo base-setup\n"
                                 "allow_cidrs: [10.0.0.0/8]\n"}, REWRITE_CONFIG)
    done = decode_eval(tmp_path, str(tasks), "--out", "out", DECODE_MODEL=f"scripted:{tmp_path / 'sessions.json'}")
    assert done.returncode == 1, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    found = results(tmp_path / "out")["t"]
    assert found["status"] == "error" and "DECODE_ALLOW_CIDRS_MAX" in found["reason"], found
    log = (tmp_path / "out" / "checks" / "t" / "base" / "transcript.jsonl").read_text()
    assert "base-setup" not in log and '"exit_code"' not in log, "no sandbox ran setup or the check"
    assert not (tmp_path / "data" / "runs").exists(), "the model was never asked"
