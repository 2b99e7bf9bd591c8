"""The channel between the harness and agentd is not the sandbox's to use: a command runs under agentd's own
user, and through /proc it could open agentd's end of the channel (or that of a process holding it, such as
bwrap's own pid 1) to forge answers to the harness or steal its requests. agentd is undumpable and, under
bwrap, is the sandbox's pid 1, so nothing in the sandbox can open it; docker's channel is a socket as well.
Not Modal: its commands run as root beside the exec stream of Modal's own runtime (docs/security.md)."""

from __future__ import annotations

import os

import pytest

from tests.cli.test_run_mcp import results, use
from tests.conftest import make_repo
from tests.sandbox.conftest import IMAGE, require
from tests.support.cli import decode_run

# every other process's stdin and stdout: a forged answer (ids are small counters), then a read of a request
FORGE = r"""
for p in /proc/[0-9]*; do
  n=${p#/proc/}
  [ "$n" = "$$" ] || [ "$n" = "$BASHPID" ] && continue
  for fd in 0 1; do
    for id in 1 2 3 4 5 6 7 8 9 10; do
      printf '{"id": %s, "ok": true, "output": "forged", "exit_code": 0}\n' "$id" 2>/dev/null > "$p/fd/$fd" \
        && echo "wrote to $n/$fd"
    done
    timeout 1 head -c 100 "$p/fd/$fd" 2>/dev/null < /dev/null | grep -q . && echo "read from $n/$fd"
  done
done
echo tried
"""


@pytest.mark.parametrize("mode", [pytest.param("bwrap", marks=pytest.mark.bwrap),
                                  pytest.param("docker", marks=pytest.mark.docker)])
def test_a_command_cannot_write_or_read_the_harness_channel(fake_anthropic, tmp_path, mode):
    require(mode)
    repo = make_repo(tmp_path / "repo", {"a.py": ""})
    fake_anthropic.script([[use("bash", command=FORGE)], [use("bash", command="echo still here")],
                           [{"type": "text", "text": "Done."}]])
    env = {"DECODE_SANDBOX_IMAGE": IMAGE} if mode == "docker" else {}
    res = decode_run(fake_anthropic, tmp_path, repo, "Look around", mode, **env)
    # "agentd answered out of order (1 for 3)" when a forged answer got in; a timeout when a request was read
    assert res.returncode == 0, res.stderr
    forged, after = results(fake_anthropic)
    assert "tried" in forged["content"] and "still here" in after["content"], forged["content"]


# agentd's parent is the harness: every pipe it holds (but its stdin, stdout and stderr) is written one line past the
# host's cap through /proc. The harness is undumpable, so only root can: as on Modal, whose commands run as root
# beside agentd, where a line that never ends would otherwise fill the harness's memory.
FLOOD = r"""python3 - <<'PY'
import os, time
def parent(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(next(line.split()[1] for line in f if line.startswith("PPid:")))
pid = os.getpid()
while not any(arg.endswith(b"agentd.pyz") for arg in open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")):
    pid = parent(pid)
harness = parent(pid)
chunk, left = b"x" * (1 << 20), {}  # fd: [bytes still to write, when it last took any]
for fd in os.listdir(f"/proc/{harness}/fd"):
    if int(fd) > 2 and os.readlink(f"/proc/{harness}/fd/{fd}").startswith("pipe:"):
        left[os.open(f"/proc/{harness}/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)] = [300 << 20, time.monotonic()]
while left:
    for fd, state in list(left.items()):
        try:
            state[0] -= os.write(fd, chunk[:state[0]] or b"\n")
            state[1] = time.monotonic()
        except BlockingIOError:
            time.sleep(0.001)
        except BrokenPipeError:
            state[0] = -1
        if state[0] < 0 or time.monotonic() - state[1] > 2:
            del left[fd]
print("flooded")
PY"""


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can open an undumpable harness's pipes (CI runs as root)")
def test_a_line_past_the_hosts_cap_is_not_read_and_the_run_goes_on_in_a_new_sandbox(fake_anthropic, tmp_path):
    repo = make_repo(tmp_path / "repo", {"a.py": ""})
    fake_anthropic.script([[use("bash", command=FLOOD)], [use("bash", command="echo still here")],
                           [{"type": "text", "text": "Done."}]])
    res = decode_run(fake_anthropic, tmp_path, repo, "Look around", "local")
    assert res.returncode == 0, res.stderr
    flooded, after = results(fake_anthropic)
    assert "the sandbox died during this call (agentd sent a line of more than 256 MB" in flooded["content"], \
        flooded["content"][-500:]
    assert "still here" in after["content"]
