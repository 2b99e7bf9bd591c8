"""`decode run` with MCP servers from decode.yml: real servers nobody here wrote (mcp-server-time,
mcp-server-git, installed by tests/support/mcp_servers.py), started inside each real sandbox, called by the
scripted model through the fake Messages API."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import make_repo
from tests.sandbox.conftest import IMAGE as BASE_IMAGE
from tests.sandbox.conftest import require
from tests.support.cli import GITHUB_TOKEN, decode_run, printed
from tests.support import mcp_servers
from tests.support.mcp_servers import GIT, TIME

MODES = ["local", pytest.param("bwrap", marks=pytest.mark.bwrap), pytest.param("docker", marks=pytest.mark.docker),
         pytest.param("modal", marks=pytest.mark.bwrap)]


STUB = (Path(__file__).parents[1] / "support" / "mcp_stub.py").read_text()


def run(fake, tmp_path: Path, mcp: str, turns: list, mode: str = "local", files: dict | None = None, **env: str):
    """`decode run` on a repository whose decode.yml has `mcp:` entries `mcp` (tests/support/mcp_stub.py is its
    tools/stub.py); the process and its events."""
    require(mode)
    mcp_servers.installed()
    if mode == "docker":
        env["DECODE_SANDBOX_IMAGE"] = mcp_servers.image(BASE_IMAGE)
    repo = make_repo(tmp_path / "repo", {"app.py": "x = 1\n", ".github/decode.yml": "mcp:\n" + mcp,
                                         "tools/stub.py": STUB, **(files or {})})
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
    # prompt caching intact: every turn offers the same tool definitions in the same order, so turns after the
    # first read the cached prefix
    assert all(r.body["tools"] == fake_anthropic.requests[0].body["tools"] for r in fake_anthropic.requests)
    reads = [e["usage"]["cache_read_tokens"] for e in events if e["type"] == "model_response"]
    assert reads[0] == 0 and all(n > 0 for n in reads[1:]), reads


def said(res, text: str) -> int:
    """How many lines of `decode run`'s output say `text`."""
    return sum(text in line for line in (res.stdout + res.stderr).splitlines())


def downs(events: list) -> dict:
    return {e["name"]: e["reason"] for e in events if e["type"] == "mcp_server" and e["state"] == "down"}


def test_servers_that_cannot_start_or_hang_at_start_are_said_once_and_the_run_goes_on(fake_anthropic, tmp_path):
    mcp = (mcp_servers.server("nope", "python3 -m no_such_mcp_server") + mcp_servers.server("slow", "sleep 600")
           + mcp_servers.server("slower", "sleep 600") + TIME)
    turns = [[use("mcp__time__get_current_time", timezone="UTC")], [use("mcp__nope__x")],
             [{"type": "text", "text": "Done."}]]
    # 20 s: the real server takes seconds to start on a loaded machine
    res, events = run(fake_anthropic, tmp_path, mcp, turns, DECODE_MCP_START_SECONDS="20")
    assert res.returncode == 0, res.stderr
    assert said(res, "MCP server nope did not start: it exited with status 1 (") == 1, res.stderr
    assert "No module named no_such_mcp_server" in downs(events)["nope"]
    for hung in ("slow", "slower"):  # each had the whole start time: they booted together
        assert said(res, f"MCP server {hung} did not start: it was not ready 20s after its start "
                         "(DECODE_MCP_START_SECONDS)") == 1, res.stderr
    given_up = {e["name"]: e["t"] for e in events if e["type"] == "mcp_server" and e["state"] == "down"}
    assert given_up["slower"] - given_up["slow"] < 5, f"{given_up}: they hung one after the other, not together"
    tools = [t["name"] for t in fake_anthropic.requests[0].body["tools"]]
    assert not [t for t in tools if "nope" in t or "slow" in t] and "mcp__time__get_current_time" in tools
    got = results(fake_anthropic)
    assert '"timezone": "UTC"' in got[0]["content"] and got[1]["is_error"]  # a tool never offered is unknown
    md = Path(printed(res.stdout, "transcript")).read_text()
    assert md.count("MCP server `nope` did not start") == 1 and md.count("MCP server `slow` did not start") == 1
    assert md.count("MCP server `slower` did not start") == 1


def test_a_server_that_hangs_on_a_call_or_answers_garbage_is_stopped_and_said_once(fake_anthropic, tmp_path):
    mcp = (mcp_servers.server("hang", "python3 tools/stub.py hang", env="{}")
           + mcp_servers.server("junk", "python3 tools/stub.py garbage", env="{}"))
    turns = [[use("mcp__hang__shell", command="true")], [use("mcp__hang__shell", command="true")],
             [use("mcp__junk__shell", command="true")], [{"type": "text", "text": "Done."}]]
    res, events = run(fake_anthropic, tmp_path, mcp, turns, DECODE_MCP_CALL_SECONDS="2")
    assert res.returncode == 0, res.stderr
    hung, again, junk = results(fake_anthropic)
    assert hung["is_error"] and "did not answer tools/call within 2s" in hung["content"]
    assert again["is_error"] and "the MCP server hang is not available (failed: it did not" in again["content"]
    assert junk["is_error"] and "not JSON-RPC: 'Traceback" in junk["content"]
    assert said(res, "MCP server hang ") == 1 and said(res, "MCP server junk ") == 1
    assert set(downs(events)) == {"hang", "junk"}


def test_a_server_that_logs_more_than_a_pipe_holds_goes_on_answering(fake_anthropic, tmp_path):
    mcp = mcp_servers.server("chatty", "python3 tools/stub.py chatty", env="{}")
    turns = [[use("mcp__chatty__shell", command="first")], [use("mcp__chatty__shell", command="second")],
             [{"type": "text", "text": "Done."}]]
    res, events = run(fake_anthropic, tmp_path, mcp, turns, DECODE_MCP_START_SECONDS="20", DECODE_MCP_CALL_SECONDS="20")
    assert res.returncode == 0, res.stderr
    assert not downs(events), downs(events)  # not "not ready 20s after its start": its log was read as it came
    first, second = results(fake_anthropic)
    assert (first["content"], second["content"]) == ("first", "second") and not first["is_error"]


def test_a_server_that_stops_reading_is_given_up_when_a_call_is_too_big_to_hand_it(fake_anthropic, tmp_path):
    """agentd does one thing at a time: a call it could not write whole to a server that reads nothing must not
    hold it, or every tool of the run would wait with it."""
    mcp = mcp_servers.server("deaf", "python3 tools/stub.py deaf", env="{}")
    turns = [[use("mcp__deaf__shell", command="x" * 300_000)], [use("bash", command="echo still here")],
             [{"type": "text", "text": "Done."}]]
    res, events = run(fake_anthropic, tmp_path, mcp, turns, DECODE_MCP_CALL_SECONDS="3")
    assert res.returncode == 0, res.stderr
    called, shell = results(fake_anthropic)
    assert called["is_error"] and "did not answer tools/call within 3s" in called["content"]
    assert "still here" in shell["content"]  # agentd was not held by the write
    assert downs(events) == {"deaf": "failed: it did not answer tools/call within 3s"}


def test_a_server_that_writes_on_and_on_without_answering_is_cut_off(fake_anthropic, tmp_path):
    """Its output is not gathered for the whole call's time (agentd's memory, then the harness's, would hold
    it): past twice the 16 MB an answer may be, the call fails, and the run goes on."""
    mcp = mcp_servers.server("flood", "python3 tools/stub.py flood", env="{}")
    turns = [[use("mcp__flood__shell", command="x")], [use("bash", command="echo still here")],
             [{"type": "text", "text": "Done."}]]
    res, events = run(fake_anthropic, tmp_path, mcp, turns, DECODE_MCP_CALL_SECONDS="60")
    assert res.returncode == 0, res.stderr
    flooded, shell = results(fake_anthropic)
    assert flooded["is_error"] and "more than the 16 MB one answer may be" in flooded["content"], flooded["content"]
    assert "still here" in shell["content"]
    [took] = [e["duration_s"] for e in events if e["type"] == "tool_result" and e["name"] == "mcp__flood__shell"]
    assert took < 30, f"{took:.1f} s: the flood was read until the call's time was out"


@pytest.mark.bwrap
def test_a_server_that_dies_mid_run_is_said_once_and_the_run_goes_on(fake_anthropic, tmp_path):
    turns = [[use("mcp__time__get_current_time", timezone="UTC")], [use("bash", command="pkill -f mcp_server_time")],
             [use("mcp__time__get_current_time", timezone="UTC")], [use("mcp__time__get_current_time", timezone="UTC")],
             [{"type": "text", "text": "Done."}]]
    # bwrap: its own PID namespace, so pkill finds this run's server, not a time server of a test beside it
    res, events = run(fake_anthropic, tmp_path, TIME, turns, mode="bwrap")
    assert res.returncode == 0, res.stderr
    first, _, died, later = results(fake_anthropic)
    assert not first["is_error"] and died["is_error"] and "failed: it exited" in died["content"]
    assert "is not available" in later["content"]
    assert said(res, "MCP server time ") == 1 and list(downs(events)) == ["time"]


def test_a_huge_result_is_truncated_like_other_tool_output(fake_anthropic, tmp_path):
    big = "".join(f"line {i} of a generated file that is far too long to show\n" for i in range(60_000))
    turns = [[use("mcp__git__git_show", repo_path=".", revision="HEAD")], [{"type": "text", "text": "Done."}]]
    res, _ = run(fake_anthropic, tmp_path, GIT, turns, files={"data/big.txt": big})
    assert res.returncode == 0, res.stderr
    shown = results(fake_anthropic)[0]["content"]
    assert "output truncated" in shown and len(shown) < 60_000 and "line 0 of" in shown


def test_a_required_server_that_does_not_start_fails_the_run_before_the_model_is_asked(fake_anthropic, tmp_path):
    res, _ = run(fake_anthropic, tmp_path, TIME + mcp_servers.server("nope", "python3 -m no_such_mcp_server",
                                                                     required=True), [])
    assert res.returncode == 1
    errors = [line for line in res.stderr.splitlines() if "MCP server nope" in line]
    assert len(errors) == 1 and "required: true in .github/decode.yml" in errors[0], res.stderr
    assert "Traceback" not in res.stderr and fake_anthropic.requests == []


HOSTILE = ("env; echo ---; python3 -c \"import urllib.request as u; u.urlopen('http://example.com', timeout=5)\" 2>&1 "
           "| tail -1; echo ---; touch /etc/decode-hostile-mcp $HOME/../decode-hostile-mcp 2>&1; "
           "grep -rl ghp_ /tmp /workspace \"$HOME\" 2>/dev/null; true")


@pytest.mark.parametrize("mode", [pytest.param("bwrap", marks=pytest.mark.bwrap),
                                  pytest.param("docker", marks=pytest.mark.docker)])
def test_a_hostile_server_is_held_as_a_hostile_bash_call_is(fake_anthropic, tmp_path, mode):
    """The server reads the environment, tries the network and writes outside the workspace: it sees no secret,
    reaches nothing the agent's policy refuses, and changes nothing outside the workspace, as the same command
    run by `bash` does."""
    turns = [[use("mcp__evil__shell", command=HOSTILE)], [use("bash", command=HOSTILE)],
             [{"type": "text", "text": "Done."}]]
    res, events = run(fake_anthropic, tmp_path, mcp_servers.server("evil", "python3 tools/stub.py shell", env="{}"),
                      turns, mode, GITHUB_WEBHOOK_SECRET="whsec-must-not-leak-0123")
    assert res.returncode == 0, res.stderr
    by_server, by_bash = (r["content"] for r in results(fake_anthropic))
    assert "DECODE_SANDBOX=" in by_server and "---" in by_server  # the probe ran in the server
    seen = json.dumps([r.body for r in fake_anthropic.requests])
    for secret in (GITHUB_TOKEN, "whsec-must-not-leak-0123", fake_anthropic.api_key):
        assert secret not in seen, secret
    assert "[REDACTED" not in seen  # nothing inside even needed redacting
    network = [part.split("---")[1] for part in (by_server, by_bash)]
    assert all("Forbidden" in n or "refused" in n.lower() or "Error" in n for n in network), network
    assert not Path("/etc/decode-hostile-mcp").exists() and not (tmp_path / "decode-hostile-mcp").exists()
    assert any(e["type"] == "egress_blocked" and "example.com:80" in e["destinations"] for e in events)


@pytest.mark.bwrap
def test_a_sandbox_restart_starts_the_servers_again(fake_anthropic, tmp_path):
    """The sandbox is killed from outside while a long command runs (`sleep 73`, which no other test runs, so
    no other test's killer takes it): the next MCP call reaches the server the new sandbox started."""
    from tests.run.test_restart import kill_sandbox
    turns = [[use("mcp__time__get_current_time", timezone="UTC")], [use("bash", command="sleep 73")],
             [use("mcp__time__get_current_time", timezone="Asia/Tokyo")], [{"type": "text", "text": "Done."}]]
    done, kills = threading.Event(), []

    def killer() -> None:
        while not done.is_set() and not kills:
            for entry in Path("/proc").iterdir():
                try:
                    if entry.name.isdigit() and (entry / "cmdline").read_bytes() == b"sleep\x0073\x00":
                        kill_sandbox("bwrap", int(entry.name))
                        kills.append(entry.name)
                        break
                except OSError:
                    pass
            time.sleep(0.05)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    try:
        res, events = run(fake_anthropic, tmp_path, TIME, turns, "bwrap")
    finally:
        done.set()
        thread.join()
    assert res.returncode == 0 and len(kills) == 1, res.stderr
    before, cut, after = results(fake_anthropic)
    assert "sandbox died" in cut["content"] and not after["is_error"] and "Asia/Tokyo" in after["content"]
    assert [e["state"] for e in events if e["type"] == "mcp_server"] == ["started", "started"]


def test_an_image_in_a_result_reaches_the_model_beside_its_text(fake_anthropic, tmp_path):
    turns = [[use("mcp__pic__shell", command="image")], [{"type": "text", "text": "Done."}]]
    res, events = run(fake_anthropic, tmp_path, mcp_servers.server("pic", "python3 tools/stub.py echo", env="{}"),
                      turns)
    assert res.returncode == 0, res.stderr
    (got,) = results(fake_anthropic)
    assert got["content"][0] == {"type": "text", "text": "image"}
    assert got["content"][1]["type"] == "image" and got["content"][1]["source"]["media_type"] == "image/png"
    assert next(e for e in events if e["type"] == "tool_result")["images"] == 1
