"""The `decode` console script with a standard stream whose other end is closed (bot/cli/streams.py): a closed
stdout ends quietly (the command goes on to its own exit status), a closed stderr is one line on stdout and
exit 2 before any work; never a traceback."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import make_repo
from tests.support.cli import DECODE, EXAMPLE, buggy_repo  # noqa: F401 (fixture)

STDERR_CLOSED = ("decode: standard error is closed, and decode says there what it does and what went wrong: give it "
                 "somewhere to go (2>/dev/null to drop it, 2>FILE to keep it)")


def environment(tmp_path: Path, **env: str) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), "DECODE_DATA_DIR": str(tmp_path / "data"),
            "PYTHONPATH": str(EXAMPLE.parents[1]), "SANDBOX_MODE": "local",
            "DECODE_MODEL": f"scripted:{EXAMPLE / 'session.json'}", **env}


def readerless_pipe() -> int:
    """The write end of a pipe whose reader is already gone: every write to it fails with EPIPE."""
    read, write = os.pipe()
    os.close(read)
    return write


@pytest.mark.parametrize("argv", [["check", "--repo", "{repo}"], ["--help"]], ids=["check", "help"])
def test_a_stdout_nobody_reads_ends_quietly(tmp_path, argv):
    repo = make_repo(tmp_path / "repo", {"a.py": ""})
    out = readerless_pipe()
    try:
        done = subprocess.run([DECODE, *(a.replace("{repo}", str(repo)) for a in argv)], stdout=out,
                              stderr=subprocess.PIPE, text=True, env=environment(tmp_path), timeout=60)
    finally:
        os.close(out)
    assert (done.returncode, done.stderr) == (0, "")


def test_a_run_whose_stdout_reader_left_still_commits_and_exits_0(tmp_path, buggy_repo):
    for argv in (["run", "--repo", str(buggy_repo), "Fix the weekend check"], ["runs"]):
        out = readerless_pipe()
        try:
            done = subprocess.run([DECODE, *argv], stdout=out, stderr=subprocess.PIPE, text=True,
                                  env=environment(tmp_path), timeout=240)
        finally:
            os.close(out)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr == ""  # `decode runs` had a run to list, on the stdout nobody reads
    branches = subprocess.run(["git", "-C", str(buggy_repo), "branch", "--list", "decode/run-*"], capture_output=True,
                              text=True, check=True).stdout
    assert branches.strip(), "the run's branch is in the repository"


@pytest.mark.parametrize("how", ["closed", "nobody reads it"])
def test_a_closed_stderr_is_one_line_on_stdout_and_exit_2_before_any_work(tmp_path, how):
    repo = make_repo(tmp_path / "repo", {"a.py": ""})
    argv = [DECODE, "run", "--repo", str(repo), "Add a docstring"]
    if how == "closed":
        done = subprocess.run(["bash", "-c", 'exec "$@" 2>&-', "bash", *argv], capture_output=True, text=True,
                              env=environment(tmp_path), timeout=60)
    else:
        err = readerless_pipe()
        try:
            done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=err, text=True, env=environment(tmp_path),
                                  timeout=60)
        finally:
            os.close(err)
    assert (done.returncode, done.stdout) == (2, STDERR_CLOSED + "\n")
    assert not (tmp_path / "data" / "runs").exists(), "nothing was started"


def test_a_run_whose_stderr_reader_leaves_midway_still_commits_and_exits_0(tmp_path, buggy_repo):
    run = subprocess.Popen([DECODE, "run", "--repo", str(buggy_repo), "Fix the weekend check"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment(tmp_path))
    assert run.stderr is not None and run.stdout is not None
    first = run.stderr.readline()  # the run has started and said so; then its reader goes away
    run.stderr.close()
    out = run.stdout.read()
    assert run.wait(timeout=240) == 0, (first, out)
    assert "branch: decode/run-" in out and "commit: " in out and "commit: none" not in out
