"""`scripts/demo-app`, the offline App demo the README offers, end to end as a user runs it: the real
`decode serve` against the fake GitHub and the fake Messages API, a labeled issue delivered as a signed
webhook, the pull request that fixes the example's bug (its diff, the tracking comment, and the pages of both
on the fake GitHub), and its live transcript page."""

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
        printed = ""
        deadline = time.monotonic() + 240
        while "serving until Ctrl-C" not in said and time.monotonic() < deadline:
            line = demo.stdout.readline()
            assert line, demo.stderr.read()
            printed += line
            key, _, value = line.strip().partition(": ")
            said[key] = value
        assert said["issue #1 labeled `agent`"] == "signed webhook delivered, 202"
        assert said["pull request"].endswith("/octo/calendar/pull/2 (The weekend tests fail on Saturdays)")
        pr = said["pull request"].split()[0]
        diff = printed.split(f"its diff ({pr}.diff):\n")[1].split("the tracking comment")[0]
        assert "-    return day.weekday() > 5\n    +    return day.weekday() >= 5" in diff
        tracking = printed.split("the tracking comment on issue #1 (")[1]
        assert f"Opened {pr}" in tracking and "/runs/job-1?exp=" in tracking
        pages = {pr: ["The weekend tests fail on Saturdays", "Fixes #1", "+    return day.weekday() &gt;= 5"],
                 pr.replace("/pull/2", "/issues/1"): [f'Opened <a href="{pr}">', "The weekend tests"]}
        for link, shown in pages.items():
            with urllib.request.urlopen(link, timeout=10) as answer:  # the links open in a browser, no 404
                page_html = answer.read().decode()
            assert answer.status == 200 and answer.headers["content-type"].startswith("text/html")
            assert all(s in page_html for s in shown), page_html
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
