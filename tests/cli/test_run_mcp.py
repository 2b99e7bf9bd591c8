"""`decode run` with MCP servers from decode.yml: real servers nobody here wrote (mcp-server-time,
mcp-server-git, installed by tests/support/mcp_servers.py), started inside each real sandbox, called by the
scripted model through the fake Messages API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import make_repo
from tests.sandbox.conftest import IMAGE as BASE_IMAGE
from tests.sandbox.conftest import require
from tests.support.cli import decode_run, printed
from tests.support import mcp_servers
from tests.support.mcp_servers import GIT, TIME

MODES = ["local", pytest.param("bwrap", marks=pytest.mark.bwrap), pytest.param("docker", marks=pytest.mark.docker),
         pytest.param("modal", marks=pytest.mark.bwrap)]


def run(fake, tmp_path: Path, mcp: str, turns: list, mode: str = "local", **env: str):
    """`decode run` on a repository whose decode.yml has `mcp:` entries `mcp`; the process and its events."""
    require(mode)
    mcp_servers.installed()
    if mode == "docker":
        env["DECODE_SANDBOX_IMAGE"] = mcp_servers.image(BASE_IMAGE)
    repo = make_repo(tmp_path / "repo", {"app.py": "x = 1\n", ".github/decode.yml": "mcp:\n" + mcp})
    fake.script(turns)
    res = decode_run(fake, tmp_path, repo, "Use the tools", mode, **env)
    jsonl = next((tmp_path / "data" / "runs").glob("*/transcript.jsonl"), None)
    events = [json.loads(line) for line in jsonl.read_text().splitlines()] if jsonl else []
    return res, events


def use(name: str, **args: object) -> dict:
    return {"type": "tool_use", "name": name, "input": args}


def results(fake) -> list:
    """The tool results the model was sent, in order."""
    last = fake.requests[-1].body["messages"]
    return [b for m in last if m["role"] == "user" and isinstance(m["content"], list) for b in m["content"]
            if b.get("type") == "tool_result"]


@pytest.mark.parametrize("mode", MODES)
def test_two_real_servers_are_offered_called_and_their_results_reach_the_model(fake_anthropic, tmp_path, mode):
    turns = [[use("mcp__time__get_current_time", timezone="Europe/Paris"), use("mcp__git__git_status", repo_path=".")],
             [use("mcp__time__convert_time", source_timezone="UTC", time="12:00", target_timezone="Asia/Tokyo")],
             [{"type": "text", "text": "Done."}]]
    res, events = run(fake_anthropic, tmp_path, TIME + GIT, turns, mode)
    assert res.returncode == 0, res.stderr
    tools = [t["name"] for t in fake_anthropic.requests[0].body["tools"]]
    assert tools[:6] == ["bash", "read", "write", "edit", "glob", "grep"]
    assert {"mcp__time__get_current_time", "mcp__time__convert_time", "mcp__git__git_status"} <= set(tools), res.stderr
    schema = next(t for t in fake_anthropic.requests[0].body["tools"] if t["name"] == "mcp__time__get_current_time")
    assert "timezone" in schema["input_schema"]["properties"]  # the server's own schema
    got = results(fake_anthropic)
    assert not any(r.get("is_error") for r in got), got
    assert "Europe/Paris" in json.dumps(got[0]) and "On branch" in json.dumps(got[1])
    assert "21:00" in json.dumps(got[2])  # 12:00 UTC is 21:00 in Tokyo
    started = [e for e in events if e["type"] == "mcp_server"]
    assert [(e["name"], e["state"]) for e in started] == [("time", "started"), ("git", "started")]
    md = Path(printed(res.stdout, "transcript")).read_text()
    assert "mcp__git__git_status" in md and "On branch" in md
