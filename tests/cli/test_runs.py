"""`decode runs`: the runs of DECODE_DATA_DIR from their record.json, newest first, through the console script."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

from bot.model import Usage
from bot.run.result import RECORD, Figures, RunResult, write_record
from bot.workspace.run_dirs import fresh_dir
from tests.support.cli import DECODE

ROOT = Path(__file__).resolve().parents[2]


def decode_runs(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "HOME": str(data), "DECODE_DATA_DIR": str(data), "PYTHONPATH": str(ROOT)}
    return subprocess.run([DECODE, "runs", *args], env=env, capture_output=True, text=True, timeout=60)


def run_dir(data: Path, name: str) -> Path:
    directory = data / "runs" / name
    directory.mkdir(parents=True)
    return directory


def test_runs_lists_each_run_newest_first_with_its_pr_or_branch_cost_and_time(tmp_path: Path) -> None:
    figures = Figures(turns=3, usage=Usage(input_tokens=100), cost_usd=1.25, seconds=125.0)
    write_record(run_dir(tmp_path, "job-1"), RunResult(
        "job-1", "success", repo="octo/app", branch="decode/issue-1-x", pr_url="https://github.com/octo/app/pull/9",
        commit="0123456789abcdef0123456789abcdef01234567", stop_reason="completed", figures=figures, finished_at=1000.0))
    write_record(run_dir(tmp_path, "job-2"), RunResult(
        "job-2", "no_changes", repo="octo/lib", branch="decode/issue-2-y", stop_reason="completed",
        figures=Figures(turns=1, cost_usd=0.05, seconds=9.0), finished_at=2000.0))
    (run_dir(tmp_path, "job-3") / "transcript.jsonl").write_text("")  # still going
    listed = decode_runs(tmp_path)
    assert listed.returncode == 0, listed.stderr
    head, *lines = listed.stdout.splitlines()
    assert head.split() == ["id", "repository", "state", "pr", "or", "branch", "commit", "cost", "time"]
    assert [line.split()[0] for line in lines] == ["job-3", "job-2", "job-1"]
    assert lines[0].split()[1:] == ["-", "unfinished", "-", "-", "-", "-"]
    assert lines[1].split()[1:] == ["octo/lib", "no_changes", "decode/issue-2-y", "-", "$0.05", "9s"]
    assert lines[2].split()[1:] == ["octo/app", "success", "https://github.com/octo/app/pull/9", "0123456789ab", "$1.25",
                                "2m", "05s"]
    limited = decode_runs(tmp_path, "--limit", "1")
    assert [line.split()[0] for line in limited.stdout.splitlines()[1:]] == ["job-3"]


def test_records_of_earlier_shapes_show_what_they_hold_without_a_traceback(tmp_path: Path) -> None:
    (run_dir(tmp_path, "r-flat") / RECORD).write_text(json.dumps({  # record.json before RunResult
        "run_id": "r-flat", "repo": "octo/old", "branch": "decode/run-r", "commit": None, "stop_reason": "max_cost",
        "turns": 4, "cost_usd": 2.5, "wall_s": 61.0, "changed": [], "finished_at": 3000.0}))
    (run_dir(tmp_path, "r-store") / RECORD).write_text(json.dumps({  # the job store's result before RunResult
        "state": "done", "figures": {"turns": 7, "seconds": 5.0, "cost_usd": 0.5, "tokens": {"input": 10}}}))
    (run_dir(tmp_path, "r-torn") / RECORD).write_text('{"state": ')
    (run_dir(tmp_path, "r-list") / RECORD).write_text("[1, 2]")
    listed = decode_runs(tmp_path)
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
    rows = {line.split()[0]: line.split()[1:] for line in listed.stdout.splitlines()[1:]}
    assert rows["r-flat"] == ["octo/old", "no_changes", "decode/run-r", "-", "$2.50", "1m", "01s"]
    assert rows["r-store"] == ["-", "done", "-", "-", "$0.50", "5s"]
    assert rows["r-torn"][1] == rows["r-list"][1] == "unfinished"


def test_an_empty_data_dir_and_a_bad_limit(tmp_path: Path) -> None:
    empty = decode_runs(tmp_path)
    assert empty.returncode == 0 and empty.stdout == "" and "no runs in" in empty.stderr
    bad = decode_runs(tmp_path, "--limit", "0")
    assert bad.returncode == 2 and bad.stderr.startswith("decode: --limit 0 is not valid"), bad.stderr


def test_runs_go_page_by_page_in_the_order_they_were_made_and_pruned_ones_are_passed_over(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for i in range(1, 8):
        fresh_dir(runs, f"job-{i}")
    (runs / "job-6").rmdir()  # pruned
    first = decode_runs(tmp_path, "--limit", "3")
    assert [line.split()[0] for line in first.stdout.splitlines()[1:]] == ["job-7", "job-5", "job-4"]
    second = decode_runs(tmp_path, "--limit", "3", "--before", "job-4")
    assert [line.split()[0] for line in second.stdout.splitlines()[1:]] == ["job-3", "job-2", "job-1"]
    bad = decode_runs(tmp_path, "--before", "job-99")
    assert bad.returncode == 2 and "--before job-99: there is no such run" in bad.stderr


def test_runs_made_before_the_index_are_still_listed_after_new_runs_append_to_it(tmp_path: Path) -> None:
    for i in range(1, 4):  # a data dir from before runs.index: its runs made by an older decode-bot
        os.utime(run_dir(tmp_path, f"job-{i}"), (1000.0 + i, 1000.0 + i))
    assert not (tmp_path / "runs.index").exists()
    threads = [threading.Thread(target=fresh_dir, args=(tmp_path / "runs", f"job-{i}")) for i in range(4, 8)]
    for thread in threads:  # the first runs of the new version, at once: whichever appends first makes the index
        thread.start()
    for thread in threads:
        thread.join()
    listed = [line.split()[0] for line in decode_runs(tmp_path).stdout.splitlines()[1:]]
    assert sorted(listed[:4]) == ["job-4", "job-5", "job-6", "job-7"]  # the new ones, in the order they came
    assert listed[4:] == ["job-3", "job-2", "job-1"]  # then every older run, oldest last
