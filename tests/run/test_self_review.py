"""`review: true` in decode.yml: after the agent's answer and `verify:`, a read-only pass reviews the diff; findings
that matter go back to the agent once, and the PR body, check run and transcript say what happened. Through the
GitHub job: GitHub's own webhook example, the fake GitHub and the fake Messages API with a scripted session."""

from __future__ import annotations

import json

import pytest

from bot.core.errors import ConfigError
from bot.run.repo_config import config_of
from tests.fakes.github_check_runs import decode_runs
from tests.support.github_job import NAME, OWNER, delivery, run, world  # noqa: F401 (fixture)


def edit(old: str, new: str) -> list:
    return [{"type": "tool_use", "name": "edit", "input": {"path": "calendar_utils.py", "old_string": old,
                                                           "new_string": new}}]


def labeled(world, config: str) -> int:
    fake, *_ = world
    fake.push_branch(OWNER, NAME, "main", {".github/decode.yml": config})
    return fake.add_issue(OWNER, NAME, "Saturdays are workdays", "Fix is_weekend.", user="alice")


def test_a_finding_goes_back_to_the_agent_once_and_the_pull_request_says_so(world):
    fake, anthropic, *_ = world
    number = labeled(world, "review: true\nverify: ['python3 -c pass']\n")
    anthropic.script([
        edit("return day.weekday() > 5", "return day.weekday() >= 6"),
        [{"type": "text", "text": "Fixed is_weekend."}],
        [{"type": "text", "text": "- [high] calendar_utils.py:5: `>= 6` still misses Saturday; use `>= 5`.\n"
                                  "- [low] no test for Sunday.\nVERDICT: changes"}],
        edit("return day.weekday() >= 6", "return day.weekday() >= 5"),
        [{"type": "text", "text": "Fixed is_weekend; the review caught `>= 6`, now `>= 5`."}],
    ])
    done = run(world, "issues", delivery("issues", "labeled", issue__number=number, label__name="agent"),
               run_id="rev")
    assert done.state == "success", done.message
    review_request = anthropic.requests[2].body
    assert [t["name"] for t in review_request["tools"]] == ["bash", "read", "glob", "grep"]
    assert "weekday() >= 6" in json.dumps(review_request["messages"][0])  # the diff
    assert "still misses Saturday" in json.dumps(anthropic.requests[3].body["messages"][-1])
    assert "no test for Sunday" not in json.dumps(anthropic.requests[3].body["messages"][-1])  # low: not sent
    [pr] = fake.pulls(OWNER, NAME)
    assert "return day.weekday() >= 5" in fake.file(OWNER, NAME, pr["head"]["ref"], "calendar_utils.py")
    assert "**Self-review:** found 1 high, 1 low; they went back to the agent once" in pr["body"]
    assert "| 5 |" in pr["body"]  # turns: four of the agent's and the review's one
    [check] = decode_runs(fake, OWNER, NAME)
    assert "Self-review" in check["output"]["text"]
    assert len(anthropic.requests) == 5


def test_a_clean_review_adds_one_line(world):
    fake, anthropic, *_ = world
    number = labeled(world, "review: true\n")
    anthropic.script([edit("return day.weekday() > 5", "return day.weekday() >= 5"),
                      [{"type": "text", "text": "Fixed is_weekend."}],
                      [{"type": "text", "text": "Looks right.\nVERDICT: clean"}]])
    done = run(world, "issues", delivery("issues", "labeled", issue__number=number, label__name="agent"),
               run_id="clean")
    assert done.state == "success", done.message
    [pr] = fake.pulls(OWNER, NAME)
    assert "**Self-review:** ✅ clean: nothing to change." in pr["body"] and len(anthropic.requests) == 3


def test_review_is_off_by_default_and_must_be_a_boolean():
    assert config_of(b"network: false\n", "").review is False
    assert config_of(b"review: true\n", "").review is True
    with pytest.raises(ConfigError, match="'review' must be true"):
        config_of(b"review: yes please\n", "")


def test_the_verdict_line_says_what_the_review_did():
    from bot.agent.loop import AgentResult
    from bot.run.self_review import Finding, Outcome

    assert Outcome().line.startswith("**Self-review:** not run")
    stopped = Outcome("unfinished", (), False, AgentResult("max_turns", ""))
    assert "did not finish (max_turns)" in stopped.line and "unreviewed" in stopped.line
    low = Outcome("changes", (Finding("low", "a nit"),), False)
    assert "1 low" in low.line and "none went back" in low.line
