"""`decode eval` as a user runs it: the shipped task set (bench/eval/build.py, its scripted sessions in
bench/eval/sessions.json) through the real console script, pipeline and bwrap sandbox, two tasks at a time;
a task that errors among others; and the bad inputs, each one line and exit 2."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.cli import DECODE, EXAMPLE

ROOT = EXAMPLE.parents[1]
BUILD = ROOT / "bench" / "eval" / "build.py"
SESSIONS = ROOT / "bench" / "eval" / "sessions.json"
FIELDS = {"id", "status", "turns", "cost_usd", "seconds", "branch", "transcript"}


def decode_eval(tmp_path: Path, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT),
                "DECODE_MODEL": f"scripted:{SESSIONS}", "SANDBOX_MODE": "bwrap",
                "DECODE_DATA_DIR": str(tmp_path / "data"), **env}
    return subprocess.run([DECODE, "eval", *argv], env=full_env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=240)


@pytest.fixture
def task_set(tmp_path: Path) -> Path:
    """The shipped set, built as a user builds it."""
    built = subprocess.run([sys.executable, str(BUILD), str(tmp_path / "set")], capture_output=True, text=True,
                           check=True)
    assert "decode eval" in built.stdout
    return tmp_path / "set" / "TASKS.jsonl"


def results(out: Path) -> dict[str, dict]:
    return {r["id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}


def test_the_shipped_set_resolves_two_of_three_valid_tasks(tmp_path, task_set):
    done = decode_eval(tmp_path, str(task_set), "--out", "out", "--parallel", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["id", "status", "turns", "cost", "seconds"]
    rows = {line.split()[0]: line.split()[1:] for line in lines[1:5]}
    assert {task: row[0] for task, row in rows.items()} == {
        "pager-off-by-one": "resolved", "slug-punctuation": "resolved", "pager-exact-pages": "invalid",
        "leap-centuries": "unresolved"}
    assert rows["pager-off-by-one"][1] == "4" and rows["pager-exact-pages"][1:3] == ["0", "$0.0000"]
    assert lines[5] == "resolved 2 of 3 (67%); 4 tasks: 1 invalid, 0 errors"
    assert lines[6].startswith("cost $") and ", time " in lines[6] and lines[6].endswith("s")
    assert lines[7] == f"results: {Path('out') / 'results.jsonl'}" and len(lines) == 8

    found = results(tmp_path / "out")
    assert {r["status"] for r in found.values()} == {"resolved", "unresolved", "invalid"}
    for task, r in found.items():
        assert set(r) == FIELDS | ({"reason"} if r["status"] == "invalid" else set()), task
    invalid = found["pager-exact-pages"]
    assert (invalid["turns"], invalid["cost_usd"], invalid["branch"], invalid["transcript"]) == (0, 0.0, None, None)
    assert "the check passes on the base main" in invalid["reason"]
    assert len(list((tmp_path / "data" / "runs").iterdir())) == 3, "the invalid task never reached a run"
    ran = [found[t] for t in ("pager-off-by-one", "slug-punctuation", "leap-centuries")]
    assert len({r["branch"] for r in ran}) == 3 and all(r["branch"].startswith("decode/run-") for r in ran)
    assert all(Path(r["transcript"]).is_file() and r["turns"] > 0 and r["cost_usd"] > 0 for r in ran)
    fixed = Path(found["pager-off-by-one"]["transcript"]).parent / "clean"
    assert "-(-total // per_page)" in subprocess.run(
        ["git", "show", f"{found['pager-off-by-one']['branch']}:pager.py"], cwd=fixed, capture_output=True,
        text=True, check=True).stdout
    # two at a time: the second task started before the first one ended
    err = done.stderr
    assert err.index("[slug-punctuation] checking the base main") < err.index("[pager-off-by-one] resolved")
    base_log = (tmp_path / "out" / "checks" / "pager-exact-pages" / "base" / "transcript.jsonl").read_text()
    assert '"exit_code": 0' in base_log and "exact_pages" in base_log


def test_a_task_that_errors_is_reported_and_the_others_go_on(tmp_path, task_set):
    tasks = [json.loads(line) for line in task_set.read_text().splitlines()]
    broken = {**tasks[0], "id": "gone", "repo": str(tmp_path / "no-such-repo")}
    unscripted = {**tasks[0], "id": "unscripted", "task": "A task no scripted session knows."}
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in (broken, tasks[0], unscripted)))
    done = decode_eval(tmp_path, str(path), "--out", "out")
    assert done.returncode == 1, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    found = results(tmp_path / "out")
    assert {t: r["status"] for t, r in found.items()} == {"gone": "error", "pager-off-by-one": "resolved",
                                                          "unscripted": "error"}, found
    assert "no-such-repo: no such path, and not owner/name or a git URL" in found["gone"]["reason"]
    assert "no session of scripted:sessions.json matches the task" in found["unscripted"]["reason"]
    assert "resolved 1 of 1 (100%); 3 tasks: 0 invalid, 2 errors" in done.stdout


LINE = {"id": "a", "repo": ".", "base": "main", "task": "t", "check": "true"}


@pytest.mark.parametrize("content, argv, says", [
    (None, ["missing.jsonl"], "missing.jsonl: cannot read the task file (No such file or directory)"),
    ("{not json\n", ["tasks.jsonl"], "tasks.jsonl:1: not JSON"),
    (json.dumps(LINE) + "\n" + json.dumps({**LINE, "id": "b", "check": 5}) + "\n", ["tasks.jsonl"],
     "tasks.jsonl:2: the field 'check' is a number: give it as a string"),
    (json.dumps({**LINE, "timeout": 5}) + "\n", ["tasks.jsonl"],
     "tasks.jsonl:1: unknown field 'timeout': the fields are id, repo, base, task, check"),
    (json.dumps({k: v for k, v in LINE.items() if k != "base"}) + "\n", ["tasks.jsonl"],
     "tasks.jsonl:1: the field 'base' is missing"),
    (json.dumps(LINE) + "\n" + json.dumps(LINE) + "\n", ["tasks.jsonl"],
     "tasks.jsonl:2: the id 'a' is also on line 1: give each task its own id"),
    ("\n", ["tasks.jsonl"], "tasks.jsonl: no tasks in it"),
    (json.dumps(LINE) + "\n", ["tasks.jsonl", "--parallel", "0"], "--parallel 0 is not valid: give 1 or more"),
    (json.dumps(LINE) + "\n", ["tasks.jsonl", "--max-turns", "0"], "--max-turns 0 is not valid"),
    (None, [], "give a task file (decode eval TASKS.jsonl), or --from-history"),
    (json.dumps(LINE) + "\n", ["tasks.jsonl", "--out", "tasks.jsonl"],
     "--out tasks.jsonl: cannot write results.jsonl there"),
    (None, ["--from-history", "octo/pager"], "--from-history needs --write TASKS.jsonl"),
    (None, ["--from-history", "not a repo", "--write", "t.jsonl"], "give a GitHub repository as OWNER/NAME"),
])
def test_a_bad_input_is_one_line_and_exit_2(tmp_path, content, argv, says):
    if content is not None:
        (tmp_path / "tasks.jsonl").write_text(content)
    done = decode_eval(tmp_path, *argv, GITHUB_TOKEN="ghp_not_used_here")
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and says in done.stderr, done.stderr
    assert done.stderr.startswith("decode: ") and "Traceback" not in done.stderr
    assert not (tmp_path / "data" / "runs").exists()


def test_sigterm_stops_the_evaluation_and_keeps_the_results_so_far(tmp_path, task_set):
    quick = json.loads(task_set.read_text().splitlines()[0])
    slow = {**quick, "id": "slow", "task": "A slow task."}
    waiting = {**quick, "id": "waiting", "task": "A task that never starts."}
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in (quick, slow, waiting)))
    session = json.loads(SESSIONS.read_text())
    session["sessions"].append({"when": "A slow task.", "turns": [[
        {"type": "tool_use", "name": "bash", "input": {"command": "sleep 120"}}], "done"]})
    (tmp_path / "sessions.json").write_text(json.dumps(session))
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT),
           "DECODE_MODEL": f"scripted:{tmp_path / 'sessions.json'}", "SANDBOX_MODE": "bwrap",
           "DECODE_DATA_DIR": str(tmp_path / "data")}
    proc = subprocess.Popen([DECODE, "eval", str(path), "--out", "out"], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = tmp_path / "out" / "results.jsonl"
    deadline = time.monotonic() + 120
    while not list((tmp_path / "data" / "runs").glob("*/workspace")) or not log.exists() \
            or "pager-off-by-one" not in log.read_text():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.1)
    time.sleep(1)  # the slow task is somewhere in its run, most likely in its `sleep 120`
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-3000:]
    assert time.monotonic() - started < 30
    assert err.splitlines()[-1] == "decode: interrupted" and "Traceback" not in err
    assert [r["id"] for r in map(json.loads, log.read_text().splitlines())] == ["pager-off-by-one"]
    assert "[waiting]" not in err, "no task starts after the interrupt"
    assert out == ""
