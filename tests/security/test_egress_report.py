"""What the egress policy blocked during the agent phase reaches the maintainer: the PR body lists each
destination with its count, so they know what to add to `allow_domains`. Through the real path: the
base branch's decode.yml, a real isolating sandbox, its proxy, the fake GitHub."""

from __future__ import annotations

import json

import pytest

from tests.support.github_job import NAME, OWNER, delivery, run, world  # noqa: F401 (fixture)
from tests.sandbox.conftest import require

FETCH = ("python3 -c \"import urllib.request as u\ntry: u.urlopen('http://{host}/simple/', timeout=10)\n"
         "except Exception as e: print('refused:', e)\"")
SESSION = [
    [{"type": "tool_use", "name": "bash", "input": {"command": FETCH.format(host="exfil.example.net")}}],
    [{"type": "tool_use", "name": "bash", "input": {"command": FETCH.format(host="exfil.example.net")}}],
    [{"type": "tool_use", "name": "bash", "input": {"command": FETCH.format(host="169.254.169.254")}}],
    [{"type": "tool_use", "name": "bash", "input": {"command": "echo done > NOTES.md"}}],
    [{"type": "text", "text": "Done."}],
]


@pytest.mark.parametrize("mode", [pytest.param("bwrap", marks=pytest.mark.bwrap),
                                  pytest.param("docker", marks=pytest.mark.docker)])
def test_blocked_destinations_are_listed_in_the_pull_request(world, mode):
    require(mode)
    fake, anthropic, *_ = world
    fake.push_branch(OWNER, NAME, "main", {".github/decode.yml": "allow_domains: [packages.example.com]\n"})
    number = fake.add_issue(OWNER, NAME, "Fix it", "", user="alice")
    anthropic.script(SESSION)
    conclusion = run(world, "issues", delivery("issues", "labeled", issue__number=number, label__name="agent"),
                     sandbox_mode=mode)
    assert conclusion.state == "success", conclusion.message
    [pr] = fake.pulls(OWNER, NAME)
    assert "- blocked: `exfil.example.net:80` x2" in pr["body"]
    assert "- blocked: `169.254.169.254:80` x1" in pr["body"]
    assert "allow_domains" in pr["body"]
    system = json.dumps(anthropic.requests[0].body["system"])
    assert "reaches only these hosts" in system and "packages.example.com" in system
    answers = json.dumps(anthropic.requests[1].body["messages"][-1])
    assert "refused: HTTP Error 403" in answers
