"""The docker backend on a rootless engine (scripts/setup-rootless), run the way a bot runs there: as the
engine's own non-root user. Container root is that user on the host, so the sandbox runs as (0, 0) and
nothing is handed to another uid; before, the launcher chowned its directories to root, which a non-root bot
is refused, so no sandbox could start. The bot's code runs from a copy that user can read, with the host's
python3 (bot.sandbox needs nothing outside the standard library)."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.sandbox.conftest import IMAGE, ROOTLESS_USER, require

ROOT = Path(__file__).parents[2]
# What builds leave that their owner may not change: Go's module cache (0555 directories of 0444 files, in
# $HOME/go: the sandbox's HOME is /tmp), a directory taken away whole. Root removes them anyway; a non-root
# bot left them on its disk after every run.
LEFT = ("for d in /tmp/go/pkg/mod/m@v1 ./vendor/m@v1; do mkdir -p $d/sub && echo x > $d/sub/f.go; done && "
        "chmod -R a-w /tmp/go ./vendor && mkdir -p ./gone/deep && touch ./gone/deep/f && chmod 000 ./gone && "
        "echo left")
PROBE = """
import json, os, subprocess, sys, tempfile
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from bot.sandbox import SandboxSpec, open_sandbox
from bot.workspace.run_dirs import drop_clones
LEFT = sys.argv[3]
run = Path(tempfile.mkdtemp(prefix="rootless-"))
ws = run / "workspace"
ws.mkdir()
subprocess.run(["git", "init", "-q", str(ws)], check=True)
box = open_sandbox("docker", SandboxSpec(workspace=ws, image=sys.argv[2], memory_mb=512, pids=256, cpus=1.0,
                                         name="rootless"))
try:
    said = {c: box.run(c).output.strip() for c in ("id -u", "echo made > made.txt && cat made.txt",
                                                   "echo t > /tmp/t && cat /tmp/t", "chown 1:1 made.txt || echo no",
                                                   LEFT)}
finally:
    box.close()
print(json.dumps({"said": said, "owner": (ws / "made.txt").stat().st_uid, "me": os.getuid(),
                  "beside": sorted(p.name for p in run.iterdir())}), flush=True)
drop_clones(run)
print(json.dumps({"after": sorted(p.name for p in run.iterdir())}))
subprocess.run(["rm", "-rf", str(run)])
"""


@pytest.mark.docker
def test_a_non_root_bot_runs_its_sandboxes_on_its_rootless_engine() -> None:
    require("rootless")
    user = pwd.getpwnam(ROOTLESS_USER)
    code = Path(tempfile.mkdtemp(prefix="decode-rootless-"))  # 0700, then readable: the user's python reads it
    try:
        shutil.copytree(ROOT / "bot", code / "bot", ignore=shutil.ignore_patterns("__pycache__"))
        (code / "probe.py").write_text(PROBE)
        os.chmod(code, 0o755)
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": user.pw_dir,
               "DOCKER_HOST": f"unix:///run/user/{user.pw_uid}/docker.sock"}
        done = subprocess.run(["runuser", "-u", ROOTLESS_USER, "--", "/usr/bin/env", "-i",
                               *(f"{k}={v}" for k, v in env.items()), "python3", "-I", str(code / "probe.py"),
                               str(code), IMAGE, LEFT], capture_output=True, text=True, timeout=300)
    finally:
        shutil.rmtree(code)
    assert done.returncode == 0, done.stderr[-2000:]
    seen, after = (json.loads(line) for line in done.stdout.splitlines()[-2:])
    assert seen["said"]["id -u"] == "0"  # container root: the bot's user on the host...
    assert seen["owner"] == seen["me"] == user.pw_uid  # ...whose files the agent's are
    assert seen["said"]["echo made > made.txt && cat made.txt"] == "made"
    assert seen["said"]["echo t > /tmp/t && cat /tmp/t"] == "t"
    assert seen["said"]["chown 1:1 made.txt || echo no"].endswith("no")  # still without capabilities
    assert seen["said"][LEFT] == "left"
    assert seen["beside"] == ["workspace"]  # its temp (a read-only Go cache in it) and egress directories went
    assert after["after"] == []  # the run's copy goes as the pipeline drops it, what the agent locked included
