"""The hand-back never loses the rest: what the host will not carry out of the sandbox (an outward
symlink, direct or through a chain of in-tree links, a file over DECODE_MAX_FILE_MB) is left out and
named, the agent's real fix is committed, and the agent gets one turn to fix the entries first."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.support.github_job import NAME, OWNER, delivery, run, world  # noqa: F401 (fixture)
from tests.sandbox.conftest import ISOLATED, require

HOSTILE = ("mkdir -p sub && ln -s .. sub/up && ln -s sub/up/sub/up/../../../etc/passwd chained"
           " && ln -s /etc/passwd direct && head -c 120M /dev/zero > big.bin"
           " && sed -i 's/weekday() > 5/weekday() >= 5/' calendar_utils.py")
SESSION = [
    [{"type": "tool_use", "name": "bash", "input": {"command": HOSTILE}}],
    [{"type": "text", "text": "Fixed is_weekend."}],
    [{"type": "tool_use", "name": "bash", "input": {"command": "rm direct"}}],
    [{"type": "text", "text": "Fixed is_weekend; removed the direct link, kept the rest."}],
]


@pytest.mark.parametrize("mode", ISOLATED)
def test_a_hostile_hand_back_ends_in_one_pull_request_with_the_fix_and_the_rest_named(world, mode):
    require(mode)
    fake, anthropic, *_ = world
    number = fake.add_issue(OWNER, NAME, "Weekend check is wrong", "Saturdays count as workdays.", user="alice")
    anthropic.script(SESSION)
    conclusion = run(world, "issues", delivery("issues", "labeled", issue__number=number, label__name="agent"),
                     sandbox_mode=mode)
    assert conclusion.state == "success", conclusion.message
    [pr] = fake.pulls(OWNER, NAME)
    branch = pr["head"]["ref"]
    assert ">= 5" in fake.file(OWNER, NAME, branch, "calendar_utils.py")
    assert fake.file(OWNER, NAME, branch, "sub/up") == ".."  # an in-tree link on its own is kept
    for gone in ("chained", "direct", "big.bin"):
        with pytest.raises(subprocess.CalledProcessError):
            fake.file(OWNER, NAME, branch, gone)
    # the agent was told, once, before its answer was accepted
    told = [json.dumps(r.body["messages"][-1]) for r in anthropic.requests
            if "Before your answer is accepted" in json.dumps(r.body["messages"][-1])]
    assert len(told) == 1 and all(name in told[0] for name in ("chained", "direct", "big.bin"))
    assert len(anthropic.requests) == 4 and anthropic.remaining == 0
    # what was left out, and why, is named in the PR body, the tracking comment and the transcript
    notes = pr["body"].split("<summary>Transcript</summary>")[0]
    assert "`chained`" in notes and "resolves outside the repository" in notes
    assert "`big.bin`" in notes and "120 MB, over the 50 MB limit" in notes
    assert "`direct`" not in notes  # the agent fixed that one in its extra turn
    [tracking] = fake.comments(OWNER, NAME, number)
    assert "`chained`" in tracking["body"] and "`big.bin`" in tracking["body"]
    transcript = conclusion.ran.transcript_md.read_text()
    assert "left out of the commit" in transcript and "chained" in transcript
