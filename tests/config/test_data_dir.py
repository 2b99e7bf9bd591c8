"""DECODE_DATA_DIR naming a file, or a directory that cannot be made: every entry point of the `decode` console
script stops with one line naming the variable and the fix, exit 2, before any work; never a traceback."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

from tests.conftest import make_repo
from tests.support.cli import DECODE, EXAMPLE

ENTRY_POINTS = {
    "run": ["run", "--repo", "{repo}", "Add a docstring"],
    "serve": ["serve", "--port", "{port}"],
    "worker": ["worker"],
    "action": ["action"],
    "eval": ["eval", "{tasks}", "--out", "{out}"],
    "check": ["check", "--repo", "{repo}"],
    "runs": ["runs"],
    "cache": ["cache", "list"],
    "image": ["image", "build", "decode-firstuse-never:0"],
}


def decode(tmp_path: Path, data_dir: str, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """`decode ARGV` with DECODE_DATA_DIR=data_dir, in a workflow_dispatch event for `decode action`."""
    repo = make_repo(tmp_path / "repo", {"a.py": ""})
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "t", "repo": str(repo), "base": "main", "task": "x", "check": "true"}) + "\n")
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"inputs": {"prompt": "Add a docstring"}}))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), "PYTHONPATH": str(EXAMPLE.parents[1]),
           "DECODE_DATA_DIR": data_dir, "SANDBOX_MODE": "local", "DECODE_MODEL": f"scripted:{EXAMPLE / 'session.json'}",
           "GITHUB_EVENT_NAME": "workflow_dispatch", "GITHUB_EVENT_PATH": str(event), "GITHUB_REPOSITORY": "octo/cal",
           "GITHUB_TOKEN": "ghp_" + "0" * 36, "GITHUB_API_URL": "http://127.0.0.1:9", "GITHUB_WEBHOOK_SECRET": "s"}
    fill = {"{repo}": str(repo), "{port}": port, "{tasks}": str(tasks), "{out}": str(tmp_path / "out")}
    argv = [fill.get(a, a) for a in argv]
    return subprocess.run([DECODE, *argv], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("entry", ENTRY_POINTS)
@pytest.mark.parametrize("where", ["a file", "under a file"])
def test_a_data_dir_that_is_a_file_is_one_line_and_exit_2(tmp_path, entry, where):
    afile = tmp_path / "not-a-dir"
    afile.write_text("")
    data_dir = str(afile if where == "a file" else afile / "data")
    done = decode(tmp_path, data_dir, ENTRY_POINTS[entry])
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    problem = "is a file, not a directory" if where == "a file" else f"cannot be made: {afile} is a file"
    assert done.stderr.strip().splitlines()[-1] == (f"decode: DECODE_DATA_DIR={data_dir} {problem}: set "
                                                    "DECODE_DATA_DIR to a directory this user may write")
    assert afile.read_text() == ""


def test_a_data_dir_the_system_will_not_make_is_one_line_and_exit_2(tmp_path):
    # /proc takes no new directory, even from root (whom a permission check would let through): the run's
    # first write fails, and the command's last guard names the path.
    done = decode(tmp_path, "/proc/decode-data", ENTRY_POINTS["run"])
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    [line] = [line for line in done.stderr.splitlines() if not line.startswith("decode: warning:")]
    assert line.startswith("decode: ") and "/proc" in line and line.endswith(("this user may write there "
                                                                             "(DECODE_DATA_DIR, or the path given)",
                                                                             "a directory this user may write"))
