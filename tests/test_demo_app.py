"""`scripts/demo-app`, the offline App demo the README offers, end to end as a user runs it: the real
`decode serve` against the fake GitHub and the fake Messages API, a labeled issue delivered as a signed
webhook, the pull request that fixes the example's bug, and its live transcript page."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.support.cli import DECODE

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "demo-app"


def test_the_app_demo_opens_a_pr_and_prints_its_live_page(tmp_path):
    python = Path(DECODE).with_name(Path(sys.executable).name)  # the interpreter whose `decode` serves
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHON": str(python), "SANDBOX_MODE": "local",
           "TMPDIR": str(tmp_path)}
    demo = subprocess.Popen([str(SCRIPT)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        said: dict[str, str] = {}
        deadline = time.monotonic() + 240
        while "serving until Ctrl-C" not in said and time.monotonic() < deadline:
            line = demo.stdout.readline()
            assert line, demo.stderr.read()
            key, _, value = line.strip().partition(": ")
            said[key] = value
        assert said["issue #1 labeled `agent`"] == "signed webhook delivered, 202"
        assert said["pull request"].endswith("/octo/calendar/pull/2 (The weekend tests fail on Saturdays)")
        page = said["transcript page"]
        assert "/runs/job-1?exp=" in page and "&sig=" in page
        with urllib.request.urlopen(page, timeout=10) as answer:  # the page serves while the demo holds
            html = answer.read().decode()
        assert answer.status == 200 and "is_weekend" in html
        demo.send_signal(signal.SIGINT)
        assert demo.wait(timeout=60) == 0, demo.stderr.read()
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)  # the demo and the decode serve it started
            demo.wait()
