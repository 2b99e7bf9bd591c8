"""`decode run --plan`: the real console script, the fake Messages API and a real git repository; the planning
run prints the plan, offers the model no write or edit tool, and leaves the repository as it was."""

from __future__ import annotations

import json
import os
import subprocess

from tests.conftest import git
from tests.support.cli import DECODE, GITHUB_TOKEN, buggy_repo  # noqa: F401 (fixture)

PLAN = "## Steps\n1. Use `>= 5` in calendar_utils.py."


def test_decode_run_plan_prints_the_plan_and_changes_nothing(fake_anthropic, tmp_path, buggy_repo):
    fake_anthropic.script([[{"type": "tool_use", "name": "bash", "input": {
        "command": "sed -i 's/> 5/>= 5/' calendar_utils.py && touch new.txt"}}], [{"type": "text", "text": PLAN}]])
    branches, head = git(buggy_repo, "branch", "--list"), git(buggy_repo, "rev-parse", "HEAD")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), "ANTHROPIC_API_KEY": fake_anthropic.api_key,
           "ANTHROPIC_BASE_URL": fake_anthropic.url, "SANDBOX_MODE": "local",
           "DECODE_DATA_DIR": str(tmp_path / "data"), "GITHUB_TOKEN": GITHUB_TOKEN}
    res = subprocess.run([DECODE, "run", "--plan", "--repo", str(buggy_repo), "Fix is_weekend on Saturdays"],
                         env=env, capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == PLAN
    assert "transcript:" in res.stderr
    assert git(buggy_repo, "branch", "--list") == branches and git(buggy_repo, "rev-parse", "HEAD") == head
    assert git(buggy_repo, "status", "--porcelain") == ""
    for request in fake_anthropic.requests:
        assert [t["name"] for t in request.body["tools"]] == ["bash", "read", "glob", "grep"]
    task = json.dumps(fake_anthropic.requests[0].body["messages"][0])
    assert "planning run" in task and "Fix is_weekend on Saturdays" in task
