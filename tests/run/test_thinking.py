"""Extended thinking through `decode run`: a 10-turn session with thinking on, against the fake API that checks the
thinking rules (https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking), runs to its commit; the
same requests without their thinking blocks are refused; the transcript shows the thinking, redacted and without
signatures, and replays through `DECODE_MODEL=scripted:transcript.jsonl`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anthropic
import pytest

from tests.conftest import git
from tests.fakes.anthropic_api import FakeAnthropic
from tests.support.cli import SESSION, buggy_repo, decode_run, printed  # noqa: F401 (fixture)

REASONING = "Saturday is weekday() 5, and the check says > 5, so Saturday is missed."


def bash(command: str) -> dict:
    return {"type": "tool_use", "name": "bash", "input": {"command": command}}


def session(key: str) -> list[list[dict]]:
    """Ten turns fixing the weekend bug; two think in their own words (one quotes a secret it must not show),
    one thinks in a redacted block, the others get the fake's generated thinking."""
    return [
        [{"type": "text", "text": "Let me run the tests first."}, bash("python3 -m unittest -v 2>&1 | tail -n 20")],
        [{"type": "thinking", "thinking": f"Two failures, both on Saturdays. Not the key {key}."},
         {"type": "tool_use", "name": "grep", "input": {"pattern": "def is_weekend", "glob": "*.py"}}],
        [{"type": "tool_use", "name": "read", "input": {"path": "calendar_utils.py"}}],
        [{"type": "redacted_thinking", "data": "the model's encrypted reasoning"}, bash("ls")],
        [{"type": "tool_use", "name": "read", "input": {"path": "test_calendar_utils.py"}}],
        [{"type": "tool_use", "name": "grep", "input": {"pattern": "weekday"}}],
        [{"type": "thinking", "thinking": REASONING},
         {"type": "tool_use", "name": "edit", "input": {"path": "calendar_utils.py", "old_string":
                                                        "return day.weekday() > 5",
                                                        "new_string": "return day.weekday() >= 5"}}],
        [bash("python3 -m unittest -v")],
        [bash("git diff --stat")],
        [{"type": "text", "text": "Fixed `is_weekend`: Saturdays (weekday 5) now count as weekend days."}],
    ]


def test_a_10_turn_session_with_thinking_on_runs_to_its_commit_and_replays(tmp_path, buggy_repo, fake_anthropic):
    with FakeAnthropic(thinking={"adaptive", "enabled"}) as fake:
        fake.script(session(fake.api_key))
        res = decode_run(fake, tmp_path, buggy_repo, SESSION["task"])
        assert res.returncode == 0, res.stderr
        assert [r.status for r in fake.requests] == [200] * 10
        assert all(r.body["thinking"] == {"type": "adaptive"} and r.body["stream"] for r in fake.requests)
        assert all(r.body["max_tokens"] == 26_000 for r in fake.requests)  # answer room plus the thinking
        output_tokens = fake.totals.output_tokens
        refused_without_thinking(fake, fake.requests[4].body)

    branch = printed(res.stdout, "branch")
    assert git(buggy_repo, "diff", "--name-only", "main", branch) == "calendar_utils.py"
    checkout = tmp_path / "check"
    subprocess.run(["git", "clone", "-q", "-b", branch, str(buggy_repo), str(checkout)], check=True)
    assert subprocess.run([sys.executable, "-m", "unittest", "-q"], cwd=checkout, capture_output=True).returncode == 0

    jsonl = Path(printed(res.stdout, "transcript (jsonl)"))
    events = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert next(e for e in events if e["type"] == "run_start")["thinking"] == "adaptive"
    assert events[-1]["usage"]["output_tokens"] == output_tokens  # thinking is billed as output, and counted
    md = Path(printed(res.stdout, "transcript")).read_text()
    assert f"> {REASONING}" in md and "> Two failures, both on Saturdays. Not the key [REDACTED:secret]." in md
    assert "> *(thinking the API keeps encrypted)*" in md and "thinking `adaptive`" in md
    assert fake.api_key not in md and fake.api_key not in jsonl.read_text()
    assert "signature" not in md and "the model's encrypted reasoning" not in md

    replay = decode_run(fake_anthropic, tmp_path / "replay", buggy_repo, SESSION["task"], DECODE_MODEL=f"scripted:{jsonl}",
                        ANTHROPIC_API_KEY="")
    assert replay.returncode == 0, replay.stderr
    assert git(buggy_repo, "diff", "main", printed(replay.stdout, "branch")) == git(buggy_repo, "diff", "main", branch)
    assert "thinking" not in replay.stderr  # `on` is the default: a model without it runs without a word
    said = [line for line in decode_run(fake_anthropic, tmp_path / "asked", buggy_repo, SESSION["task"],
                                        DECODE_MODEL=f"scripted:{jsonl}", ANTHROPIC_API_KEY="",
                                        DECODE_THINKING="2048").stderr.splitlines() if "extended thinking" in line]
    assert said == [f"a thinking budget of 2,048 tokens was asked for, but scripted:{jsonl.name} does not support "
                    "extended thinking (as the built-in figures say): thinking is off for this run"]  # once
    assert not fake_anthropic.requests  # the replay asked no API


def refused_without_thinking(fake: FakeAnthropic, body: dict) -> None:
    """The recorded request of a tool-use turn, sent again by the SDK without its thinking blocks, and with a
    thinking block whose text was changed: the API's 400s."""
    client = anthropic.Anthropic(api_key=fake.api_key, base_url=fake.url, max_retries=0, timeout=30)
    request = {k: v for k, v in body.items() if k != "stream"}
    fake.script(session(fake.api_key), by_position=True)
    assert request["messages"][-2]["content"][0]["type"] == "redacted_thinking"
    assert client.messages.create(**request).content[0].type == "thinking"  # as recorded: accepted
    dropped = [{**m, "content": [b for b in m["content"] if b["type"] not in ("thinking", "redacted_thinking")]}
               if m["role"] == "assistant" else m for m in request["messages"]]
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.messages.create(**{**request, "messages": dropped})
    assert refused.value.api_message.startswith(
        "messages.7.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`. When "
        "`thinking` is enabled, a final `assistant` message must start with a thinking block")
    changed = json.loads(json.dumps(request["messages"]))
    changed[3]["content"][0]["thinking"] += " And the tests are wrong."
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.messages.create(**{**request, "messages": changed})
    assert refused.value.api_message == "messages.3.content.0: Invalid `signature` in `thinking` block"
