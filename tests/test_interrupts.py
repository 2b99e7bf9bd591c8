"""Interrupting `decode run` (Ctrl-C, or SIGTERM from `kill`, a cancelled workflow or a container stop):
the real console script, signalled mid-run, must keep the agent's work on its branch, remove the
sandbox, write transcript.md and say in its last line where both are."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import git
from tests.sandbox.conftest import require
from tests.support.cli import DECODE, buggy_repo, printed  # noqa: F401 (fixture)

EDIT_THEN_WAIT = [
    [{"type": "tool_use", "name": "bash", "input": {"command": "echo partial > NOTES.md"}}],
    [{"type": "tool_use", "name": "bash", "input": {"command": "sleep 120"}}],
    [{"type": "text", "text": "Never reached."}],
]


def start(fake, tmp_path: Path, repo: Path, mode: str) -> subprocess.Popen[str]:
    """`decode run` in its own process group, as a shell runs a foreground job."""
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), "ANTHROPIC_API_KEY": fake.api_key,
           "ANTHROPIC_BASE_URL": fake.url, "SANDBOX_MODE": mode, "DECODE_DATA_DIR": str(tmp_path / "data")}
    return subprocess.Popen([DECODE, "run", "--repo", str(repo), "Take notes"], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def wait_until(condition, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def containers(run_dir_name: str) -> str:
    """Containers, running or not, of the run whose id starts `run_dir_name`."""
    run_id = run_dir_name.split(".")[0].split("-")[0]
    return subprocess.run(["docker", "ps", "-a", "-q", "--filter", f"name=decode-{run_id}"],
                          capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.parametrize("mode,signum", [
    pytest.param("docker", signal.SIGTERM, marks=pytest.mark.docker),
    pytest.param("bwrap", signal.SIGTERM, marks=pytest.mark.bwrap),
    pytest.param("local", signal.SIGINT),
], ids=["docker-sigterm", "bwrap-sigterm", "local-ctrl-c"])
def test_an_interrupted_run_keeps_the_work_and_removes_the_sandbox(fake_anthropic, tmp_path, buggy_repo,  # noqa: F811
                                                                   mode, signum):
    require(mode)
    fake_anthropic.script(EDIT_THEN_WAIT)
    proc = start(fake_anthropic, tmp_path, buggy_repo, mode)
    wait_until(lambda: len(fake_anthropic.requests) >= 2 or proc.poll() is not None)
    time.sleep(2)  # the second tool call, `sleep 120`, is running in the sandbox
    began = time.monotonic()
    os.killpg(proc.pid, signum)  # the whole group, as a terminal's Ctrl-C or a runner's cancel does
    stdout, stderr = proc.communicate(timeout=60)
    assert time.monotonic() - began < 30, "the interrupt waited for the tool call"
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    last = stderr.strip().splitlines()[-1]
    branch = printed(stdout, "branch")
    assert last.startswith("decode: interrupted: the work so far is commit") and branch in last, last
    assert git(buggy_repo, "show", f"{branch}:NOTES.md") == "partial"  # delivered to the user's repository
    assert "incomplete: interrupted" in git(buggy_repo, "log", "-1", "--format=%s", branch)
    md = Path(printed(stdout, "transcript"))
    assert str(md) in last and "stopped by an interrupt" in md.read_text()
    run_dir = md.parent
    assert not (run_dir / "workspace").exists()
    if mode == "docker":
        assert containers(run_dir.name) == ""


def test_an_interrupt_during_setup_says_nothing_was_committed(fake_anthropic, tmp_path, buggy_repo):  # noqa: F811
    require("docker")
    (buggy_repo / ".github").mkdir()
    (buggy_repo / ".github" / "decode.yml").write_text("setup:\n  - sleep 120\n")
    git(buggy_repo, "add", "-A")
    git(buggy_repo, "commit", "-q", "-m", "setup that takes long")
    fake_anthropic.script(EDIT_THEN_WAIT)
    proc = start(fake_anthropic, tmp_path, buggy_repo, "docker")
    runs = tmp_path / "data" / "runs"
    wait_until(lambda: runs.exists() and any(containers(d.name) for d in runs.iterdir()) or proc.poll() is not None)
    time.sleep(2)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    [run_dir] = runs.iterdir()
    assert stderr.strip().splitlines()[-1] == \
        f"decode: interrupted: nothing was committed; the transcript is {run_dir / 'transcript.md'}"
    assert (run_dir / "transcript.md").exists()
    assert containers(run_dir.name) == ""
    assert fake_anthropic.requests == []  # the agent never started
