"""`decode eval` on SWE-bench instances, end to end through the console script and the fake Anthropic API:
a tiny real repository with real pytest test ids, a `test_patch` the agent never sees, three instances
(resolved, unresolved because a PASS_TO_PASS test broke, an empty patch), and the files the official
harness reads, checked with the `swebench` package's own reader and grading functions when it is installed.

The check runs `pytest`, which the bwrap and docker sandboxes' Python lacks, so these runs use the local
sandbox with this interpreter's Python first on PATH (the runs are our own scripted sessions)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.eval.swebench import OPTIONAL, REQUIRED, parse_statuses, resolved
from tests.conftest import make_repo
from tests.eval.test_eval import ROOT, decode_eval
from tests.fakes.anthropic_api import FakeAnthropic
from tests.support.cli import DECODE

MARKER = "only_the_check_sees_this_7f3a"  # in the test patch: never in the agent's sandbox or prompt
BASE_FILES = {
    "calc.py": "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n",
    "tests/__init__.py": "",
    "tests/test_calc.py": "from calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n",
}
TEST_PATCH = f"""diff --git a/tests/test_add.py b/tests/test_add.py
new file mode 100644
--- /dev/null
+++ b/tests/test_add.py
@@ -0,0 +1,5 @@
+from calc import add
+
+
+def test_add():  # {MARKER}
+    assert add(2, 3) == 5
"""
FIX = {"path": "calc.py", "old_string": "    return a - b", "new_string": "    return a + b"}
BREAK_MUL = {"path": "calc.py", "old_string": "    return a * b", "new_string": "    return a ** b"}
SESSIONS = {
    "add-resolved": [
        [{"type": "tool_use", "name": "bash", "input": {"command": "ls tests; cat tests/test_add.py"}}],
        [{"type": "tool_use", "name": "edit", "input": FIX}], "add() adds now."],
    "add-unresolved": [
        [{"type": "tool_use", "name": "edit", "input": FIX}],
        [{"type": "tool_use", "name": "edit", "input": BREAK_MUL}], "add() adds; mul() changed too."],
    "add-empty": ["I could not find the bug."],
}


def instance(instance_id: str, repo: Path, base: str) -> dict:
    """A SWE-bench instance as the dataset has it (test lists JSON-encoded), with the fields we do not use."""
    return {"instance_id": instance_id, "repo": str(repo), "base_commit": base,
            "problem_statement": f"add(2, 3) returns -1 instead of 5 ({instance_id}).",
            "FAIL_TO_PASS": json.dumps(["tests/test_add.py::test_add"]),
            "PASS_TO_PASS": json.dumps(["tests/test_calc.py::test_mul"]), "test_patch": TEST_PATCH,
            "patch": "diff --git a/calc.py b/calc.py\n(the gold patch: never used)\n", "hints_text": "",
            "created_at": "2024-05-01T12:00:00Z", "version": "1.0", "environment_setup_commit": base}


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory):
    """The three instances through `decode eval --test-cmd ...`; (process, out dir, fake, instances)."""
    tmp_path = tmp_path_factory.mktemp("swebench")
    repo = make_repo(tmp_path / "calc", BASE_FILES)
    base = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True,
                          check=True).stdout.strip()
    instances = [instance(i, repo, base) for i in SESSIONS]
    (tmp_path / "instances.jsonl").write_text("".join(json.dumps(i) + "\n" for i in instances))
    with FakeAnthropic() as fake:
        fake.sessions({f"({i})": turns for i, turns in SESSIONS.items()})
        env = {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "HOME": str(tmp_path / "home"),
               "PYTHONPATH": str(ROOT), "ANTHROPIC_API_KEY": fake.api_key, "ANTHROPIC_BASE_URL": fake.url,
               "SANDBOX_MODE": "local", "DECODE_DATA_DIR": str(tmp_path / "data")}
        done = subprocess.run([DECODE, "eval", "instances.jsonl", "--out", "out", "--test-cmd",
                               "python3 -m pytest -rA -p no:cacheprovider tests"], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=300)
    return done, tmp_path / "out", fake, instances


def test_swebench_instances_are_judged_per_test_and_written_as_the_harness_reads_them(evaluated):
    done, out, fake, instances = evaluated
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"SWE-bench: {Path('out') / 'report.json'}" in done.stdout
    report = json.loads((out / "report.json").read_text())
    assert report["resolved_ids"] == ["add-resolved"]
    assert report["unresolved_ids"] == ["add-unresolved"]  # its FAIL_TO_PASS passes, but test_mul broke
    assert report["empty_patch_ids"] == ["add-empty"] and report["error_ids"] == []
    assert report["schema_version"] == 2 and report["total_instances"] == report["submitted_instances"] == 3
    assert report["harness_version"].startswith("decode-bot ")
    assert report["model_name_or_path"].startswith("decode-bot__claude")
    assert report["instances"]["add-empty"] == {"created_at": "2024-05-01T12:00:00Z", "version": "1.0"}

    predictions = {p["instance_id"]: p for p in map(json.loads, (out / "predictions.jsonl").read_text().splitlines())}
    assert set(predictions) == set(SESSIONS)
    assert all(set(p) == {"instance_id", "model_name_or_path", "model_patch"} for p in predictions.values())
    assert "+    return a + b" in predictions["add-resolved"]["model_patch"]
    assert "tests/test_add.py" not in predictions["add-resolved"]["model_patch"]
    assert predictions["add-empty"]["model_patch"] == ""

    # the test patch was in the checks, never in what the model read nor in the agent's workspace
    assert fake.requests and not any(MARKER in json.dumps(r.body) for r in fake.requests)
    assert "No such file" in json.dumps(fake.requests[1].body) or any(
        "No such file" in json.dumps(r.body) for r in fake.requests)
    runs = list((out.parent / "data" / "runs").iterdir())
    assert len(runs) == 3
    for run in runs:
        assert not (run / "workspace" / "tests" / "test_add.py").exists()
        assert MARKER not in (run / "transcript.jsonl").read_text()
    result_log = (out / "checks" / "add-resolved" / "result" / "transcript.jsonl").read_text()
    assert "PASSED tests/test_add.py::test_add" in result_log


def official_harness() -> None:
    """Skip where the `swebench` package (scripts/setup installs it) is missing, but not under CI: there the
    imports that follow fail, since CI must check the files with the official harness."""
    if not os.environ.get("CI"):
        pytest.importorskip("swebench")


def test_the_official_harness_reads_the_files_and_grades_the_logs_as_we_do(evaluated, monkeypatch):
    official_harness()
    from swebench.harness.constants import FAIL_TO_PASS, LOG_REPORT, PASS_TO_PASS, RUN_EVALUATION_LOG_DIR
    from swebench.harness.grading import get_eval_tests_report, get_resolution_status
    from swebench.harness.log_parsers.python import parse_log_pytest
    from swebench.harness.reporting import make_run_report
    from swebench.harness.utils import get_predictions_from_file
    from swebench.types import SWEbenchInstance

    assert {*REQUIRED, *OPTIONAL} - set(SWEbenchInstance.__annotations__) == {"test_cmd"}  # the rest are theirs

    done, out, _, instances = evaluated
    assert done.returncode == 0, done.stderr[-3000:]
    predictions = {p["instance_id"]: p for p in get_predictions_from_file(str(out / "predictions.jsonl"), "", "")}
    monkeypatch.chdir(out)  # the harness writes and reads its logs under ./logs
    for data in instances:
        iid = data["instance_id"]
        if not predictions[iid]["model_patch"]:
            continue
        log = json.loads((out / "checks" / iid / "result" / "transcript.jsonl").read_text().splitlines()[-1])
        statuses = parse_log_pytest(log["output"], None)
        assert statuses == parse_statuses(log["output"]), "our parser reads the log as SWE-bench's does"
        gold = {FAIL_TO_PASS: json.loads(data[FAIL_TO_PASS]), PASS_TO_PASS: json.loads(data[PASS_TO_PASS])}
        verdict = get_resolution_status(get_eval_tests_report(statuses, gold)) == "RESOLVED_FULL"
        assert verdict == resolved(statuses, gold[FAIL_TO_PASS], gold[PASS_TO_PASS])
        folder = RUN_EVALUATION_LOG_DIR / "check" / predictions[iid]["model_name_or_path"].replace("/", "__") / iid
        folder.mkdir(parents=True)
        (folder / LOG_REPORT).write_text(json.dumps({iid: {"resolved": verdict}}))
    theirs = json.loads(make_run_report(predictions, instances, "check").read_text())
    ours = json.loads((out / "report.json").read_text())
    for key in ("resolved_ids", "unresolved_ids", "empty_patch_ids", "error_ids", "completed_ids", "submitted_ids",
                "total_instances", "resolved_instances", "schema_version"):
        assert ours[key] == theirs[key], key


@pytest.mark.parametrize("log, expected", [
    ("PASSED tests/a.py::t\nFAILED tests/a.py::u - AssertionError: x\nSKIPPED [1] tests/a.py:3: no\n"
     "ERROR tests/b.py::v\nXFAIL tests/a.py::w - reason\n",
     {"tests/a.py::t": "PASSED", "tests/a.py::u": "FAILED", "tests/b.py::v": "ERROR", "tests/a.py::w": "XFAIL"}),
    ("tests/a.py::t PASSED [100%]\n", {}),
])
def test_test_statuses_are_read_as_swebench_reads_pytest_rA(log, expected):
    assert parse_statuses(log) == expected


def test_resolved_is_swebench_rule():
    statuses = {"f": "PASSED", "p": "SKIPPED", "x": "XFAIL", "bad": "FAILED"}
    assert resolved(statuses, ["f", "x"], ["p"])
    assert not resolved(statuses, ["f", "missing"], [])  # a FAIL_TO_PASS test absent from the log failed
    assert not resolved(statuses, ["f"], ["bad"])
    assert not resolved({"f": "SKIPPED"}, ["f"], [])  # a skipped FAIL_TO_PASS test is no resolution


GOOD = {"instance_id": "a", "repo": ".", "base_commit": "main", "problem_statement": "p", "FAIL_TO_PASS": ["t"],
        "PASS_TO_PASS": "[]", "test_patch": "diff"}


@pytest.mark.parametrize("rows, argv, says", [
    ([GOOD], [], "instance 1: no test command: give --test-cmd 'python3 -m pytest -rA' or a `test_cmd` field"),
    ([{**GOOD, "FAIL_TO_PASS": "not json"}], ["--test-cmd", "pytest"], "instance 1: FAIL_TO_PASS: not a JSON list"),
    ([{**GOOD, "FAIL_TO_PASS": []}], ["--test-cmd", "pytest"], "FAIL_TO_PASS is empty"),
    ([GOOD, {k: v for k, v in GOOD.items() if k != "test_patch"}], ["--test-cmd", "pytest"],
     "instance 2: the field 'test_patch' is missing"),
    ([GOOD, GOOD], ["--test-cmd", "pytest"], "instance 2: the instance_id 'a' is used twice"),
])
def test_a_bad_instance_is_one_line_and_exit_2(tmp_path, rows, argv, says):
    (tmp_path / "instances.json").write_text(json.dumps(rows))  # the dataset's JSON export: a list
    done = decode_eval(tmp_path, "instances.json", *argv)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and says in done.stderr, done.stderr
    assert not (tmp_path / "data" / "runs").exists()


def test_test_cmd_is_refused_with_a_plain_task_file(tmp_path):
    (tmp_path / "tasks.jsonl").write_text(json.dumps({"id": "a", "repo": ".", "base": "main", "task": "t",
                                                      "check": "true"}) + "\n")
    done = decode_eval(tmp_path, "tasks.jsonl", "--test-cmd", "pytest")
    assert done.returncode == 2 and "--test-cmd goes with SWE-bench instances" in done.stderr, done.stderr
