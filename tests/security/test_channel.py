"""The channel between the harness and agentd is not the sandbox's to use: a command runs under agentd's own
user, and through /proc it could open agentd's end of the channel (or that of a process holding it, such as
bwrap's own pid 1) to forge answers to the harness or steal its requests. agentd is undumpable and, under
bwrap, is the sandbox's pid 1, so nothing in the sandbox can open it; docker's channel is a socket as well.
Not Modal: its commands run as root beside the exec stream of Modal's own runtime (docs/security.md)."""

from __future__ import annotations

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
    # "the sandbox answered out of order (1 for 3)" when a forged answer got in; a timeout when a request was read
    assert res.returncode == 0, res.stderr
    forged, after = results(fake_anthropic)
    assert "tried" in forged["content"] and "still here" in after["content"], forged["content"]
