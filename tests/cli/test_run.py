"""`decode run` end to end: the real console script, the real anthropic SDK talking
to the fake Messages API, real git, and each real sandbox backend."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import git, make_repo
from tests.fakes.internet import internet  # noqa: F401 (fixture)
from tests.sandbox.conftest import MODES, require
from tests.support.cli import DECODE, EXAMPLE, GITHUB_TOKEN, SESSION, buggy_repo, decode_run, printed  # noqa: F401 (fixture)


@pytest.mark.parametrize("mode", MODES)
def test_decode_run_fixes_a_real_bug_on_a_branch(fake_anthropic, tmp_path, buggy_repo, mode):
    require(mode)
    fake_anthropic.script(SESSION["turns"])
    res = decode_run(fake_anthropic, tmp_path, buggy_repo, SESSION["task"], mode)
    assert res.returncode == 0, res.stderr
    branch = printed(res.stdout, "branch")
    assert branch.startswith("decode/run-")
    assert git(buggy_repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"  # the user's checkout is untouched
    assert git(buggy_repo, "diff", "--name-only", "main", branch) == "calendar_utils.py"
    assert "Co-authored-by" not in git(buggy_repo, "log", "-1", "--format=%B", branch)
    assert git(buggy_repo, "log", "-1", "--format=%an", branch) == "decode-bot"
    checkout = tmp_path / "check"
    subprocess.run(["git", "clone", "-q", "-b", branch, str(buggy_repo), str(checkout)], check=True)
    tests = subprocess.run([sys.executable, "-m", "unittest", "-q"], cwd=checkout, capture_output=True, text=True)
    assert tests.returncode == 0, tests.stderr
    md = Path(printed(res.stdout, "transcript")).read_text()
    assert "Fixed `is_weekend`" in md and "python3 -m unittest -v" in md
    jsonl = Path(printed(res.stdout, "transcript (jsonl)"))
    assert [json.loads(line)["type"] for line in jsonl.read_text().splitlines()][-1] == "run_end"
    assert "turn   1 | bash" in res.stderr  # progress for a person watching
    # the model saw the failing tests, then the passing ones, inside the sandbox
    last_request = json.dumps(fake_anthropic.requests[-1].body)
    assert "FAILED (failures=2)" in last_request and "Ran 3 tests" in last_request


@pytest.mark.parametrize("mode", MODES)
def test_no_secret_reaches_the_sandbox_or_the_model(fake_anthropic, tmp_path, buggy_repo, mode):
    require(mode)
    places = '"$HOME" .' if mode == "local" else '/tmp /workspace "$HOME"'  # local's /tmp is the host's: all tests'
    probe = ("env; echo ---; for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; done 2>/dev/null | sort -u;"
             f" echo ---; grep -rl ghp_ {places} 2>/dev/null; true")
    fake_anthropic.script([
        [{"type": "tool_use", "name": "bash", "input": {"command": probe}}],
        [{"type": "text", "text": "Looked around."}],
    ])
    res = decode_run(fake_anthropic, tmp_path, buggy_repo, "Print the environment", mode,
                     GITHUB_WEBHOOK_SECRET="whsec-must-not-leak-0123")
    assert res.returncode == 0, res.stderr
    seen = json.dumps([r.body for r in fake_anthropic.requests])
    assert "DECODE_SANDBOX=" in seen  # the probe did run and its output reached the model
    if mode != "local":  # isolated: nothing inside even needed redacting
        assert "[REDACTED" not in seen
    for secret in (GITHUB_TOKEN, "whsec-must-not-leak-0123", fake_anthropic.api_key):
        assert secret not in seen
    data = tmp_path / "data"
    for path in data.rglob("*"):
        if path.is_file() and ".git" not in path.parts:
            text = path.read_bytes()
            assert GITHUB_TOKEN.encode() not in text and fake_anthropic.api_key.encode() not in text, path
    assert GITHUB_TOKEN not in res.stdout + res.stderr


def test_a_budget_cap_keeps_the_work_and_says_why(fake_anthropic, tmp_path, buggy_repo):
    edits = [[{"type": "tool_use", "name": "bash", "input": {"command": f"echo step {i} >> NOTES.md"}}]
             for i in range(5)]
    fake_anthropic.script(edits)
    res = decode_run(fake_anthropic, tmp_path, buggy_repo, "Take notes", DECODE_MAX_TURNS="2")
    assert res.returncode == 3
    assert "stopped at the turn limit" in res.stderr
    branch = printed(res.stdout, "branch")
    assert git(buggy_repo, "show", f"{branch}:NOTES.md") == "step 0\nstep 1"
    assert "incomplete: max_turns" in git(buggy_repo, "log", "-1", "--format=%s", branch)


FETCH = """import urllib.error, urllib.request
try:
    print(urllib.request.urlopen("http://198.51.100.10:8080/who", timeout=20).read().decode().strip())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode().strip())
except Exception as e:
    print("error", e)
"""


@pytest.mark.parametrize("mode", [m for m in MODES if m.values[0] != "local"])
def test_setup_runs_with_network_and_the_agent_without(fake_anthropic, tmp_path, mode, internet):  # noqa: F811
    """Setup reaches the (fake) internet and the agent does not; bwrap and docker have only loopback
    in both phases and get out through the egress proxy (the modal double shares the host's network
    where Modal's would be open)."""
    require(mode)
    repo = make_repo(tmp_path / "r", {
        "README.md": "x\n",
        "fetch.py": FETCH,
        ".github/decode.yml": "setup:\n  - cat /proc/net/dev > $HOME/setup-net; python3 fetch.py > $HOME/setup-fetch\n",
    })
    command = ("cat $HOME/setup-net; echo ===; cat /proc/net/dev; echo ===; cat $HOME/setup-fetch; echo ===; "
               "python3 fetch.py")
    fake_anthropic.script([
        [{"type": "tool_use", "name": "bash", "input": {"command": command}}],
        [{"type": "text", "text": "Checked."}],
    ])
    res = decode_run(fake_anthropic, tmp_path, repo, "Check the network", mode)
    assert res.returncode == 0, res.stderr
    result = next(b for b in fake_anthropic.requests[-1].body["messages"][-1]["content"] if b["type"] == "tool_result")
    setup_net, agent_net, setup_fetch, agent_fetch = result["content"].split("===")
    agent_fetch = agent_fetch.strip().splitlines()[0]  # then the harness's "[exit code 0]"
    assert setup_fetch.strip() == "internet", "setup reached the internet"
    assert interfaces(agent_net) == {"lo"}, "the agent had a network interface"
    if mode == "modal":
        assert agent_fetch.startswith("error"), agent_fetch
    else:
        assert interfaces(setup_net) == {"lo"}, "setup had a network interface: its way out is the proxy"
        assert agent_fetch == ("403 decode-bot's egress proxy blocked 198.51.100.10:8080: network is off "
                                       "for the agent: set network: true or allow_domains in .github/decode.yml")


def interfaces(proc_net_dev: str) -> set[str]:
    """Interface names from /proc/net/dev, which shows the reading process's network namespace."""
    return {line.split(":")[0].strip() for line in proc_net_dev.splitlines() if ":" in line and "|" not in line}


@pytest.mark.parametrize(
    "env, message",
    [
        ({"SANDBOX_MODE": "vm"}, "SANDBOX_MODE='vm' is not valid"),
        ({"ANTHROPIC_API_KEY": ""}, "ANTHROPIC_API_KEY is not set"),
        ({"DECODE_MAX_TURNS": "many"}, "DECODE_MAX_TURNS='many' is not valid"),
        ({"DECODE_THINKING": "100"}, "DECODE_THINKING='100' is not valid: set it to on, off or a thinking budget"),
    ],
)
def test_bad_settings_are_one_line_errors(fake_anthropic, tmp_path, buggy_repo, env, message):
    res = decode_run(fake_anthropic, tmp_path, buggy_repo, "anything", **env)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines()[-1].startswith(f"decode: {message}")
    assert "Traceback" not in res.stderr


def test_an_invalid_repo_config_names_the_key(fake_anthropic, tmp_path):
    repo = make_repo(tmp_path / "r", {".github/decode.yml": "setup: [ok]\nnetwrk: true\n"})
    res = decode_run(fake_anthropic, tmp_path, repo, "anything")
    assert res.returncode == 2 and "unknown key 'netwrk'" in res.stderr
    assert not fake_anthropic.requests  # nothing started


def test_a_bad_thinking_in_decode_yml_stops_the_run_before_any_work(fake_anthropic, tmp_path):
    repo = make_repo(tmp_path / "r", {".github/decode.yml": "thinking: lots\n"})
    res = decode_run(fake_anthropic, tmp_path, repo, "anything")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.strip().splitlines()[-1] == ("decode: .github/decode.yml: thinking='lots' is not valid: set it "
                                                   "to on, off or a thinking budget in tokens of at least 1024 (such "
                                                   "as 16000)")
    assert not fake_anthropic.requests


def test_allow_cidrs_beyond_the_operators_ceiling_stops_the_run_before_any_sandbox(fake_anthropic, tmp_path):
    repo = make_repo(tmp_path / "r", {".github/decode.yml": "setup: [ok]\nallow_cidrs: [172.17.0.0/16]\n"})
    res = decode_run(fake_anthropic, tmp_path, repo, "anything", DECODE_ALLOW_CIDRS_MAX="10.0.0.0/8")
    assert res.returncode == 2, res.stderr
    assert ("allow_cidrs lists 172.17.0.0/16, which reaches 172.16.0.0/12: the operator's DECODE_ALLOW_CIDRS_MAX "
            "(10.0.0.0/8) does not cover it") in res.stderr
    assert "starting the local sandbox" not in res.stderr and not fake_anthropic.requests


def test_a_failing_setup_stops_the_run_with_its_output(fake_anthropic, tmp_path):
    repo = make_repo(tmp_path / "r", {".github/decode.yml": "setup: 'echo cannot install; exit 4'\n"})
    res = decode_run(fake_anthropic, tmp_path, repo, "anything")
    assert res.returncode == 1
    assert "exited with 4" in res.stderr and "cannot install" in res.stderr
    assert not fake_anthropic.requests


@pytest.mark.parametrize("repo_form", ["owner/name", "url"])
def test_decode_run_on_a_github_issue_opens_the_pull_request(fake_anthropic, fake_github, tmp_path, repo_form):
    files = {p.name: p.read_text() for p in (EXAMPLE / "repo").iterdir()}
    fake_github.add_repo("octo", "calendar", files)
    number = fake_github.add_issue("octo", "calendar", "Weekend check is wrong", "Saturdays count as workdays.")
    fake_anthropic.script(SESSION["turns"])
    repo = "octo/calendar" if repo_form == "owner/name" else f"{fake_github.web_url}/octo/calendar"
    env = {
        "PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), "ANTHROPIC_API_KEY": fake_anthropic.api_key,
        "ANTHROPIC_BASE_URL": fake_anthropic.url, "SANDBOX_MODE": "local", "DECODE_DATA_DIR": str(tmp_path / "d"),
        "GITHUB_TOKEN": fake_github.token, "GITHUB_API_URL": fake_github.api_url,
    }
    res = subprocess.run([DECODE, "run", "--repo", repo, "--issue", str(number)], env=env, capture_output=True,
                         text=True, timeout=240)
    assert res.returncode == 0, res.stderr
    [pr] = fake_github.pulls("octo", "calendar")
    assert printed(res.stdout, "pull request") == pr["html_url"]
    assert f"Fixes #{number}" in pr["body"]
    assert fake_github.token not in res.stdout + res.stderr


def test_decode_run_on_github_without_a_token_says_what_to_set(fake_anthropic, tmp_path):
    res = decode_run(fake_anthropic, tmp_path, "octo/calendar", "anything", GITHUB_TOKEN="")
    assert res.returncode == 2 and "GITHUB_TOKEN is not set" in res.stderr


def test_decode_run_on_an_issue_that_is_not_there_writes_nothing_and_says_so(fake_anthropic, fake_github, tmp_path):
    fake_github.add_repo("octo", "calendar", {p.name: p.read_text() for p in (EXAMPLE / "repo").iterdir()})
    env = {
        "PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), "ANTHROPIC_API_KEY": fake_anthropic.api_key,
        "ANTHROPIC_BASE_URL": fake_anthropic.url, "SANDBOX_MODE": "local", "DECODE_DATA_DIR": str(tmp_path / "d"),
        "GITHUB_TOKEN": fake_github.token, "GITHUB_API_URL": fake_github.api_url,
    }
    res = subprocess.run([DECODE, "run", "--repo", "octo/calendar", "--issue", "999"], env=env,
                         capture_output=True, text=True, timeout=240)
    assert res.returncode == 2, res.stderr
    assert "#999 is not an issue or pull request of octo/calendar" in res.stderr
    assert fake_github.writes() == [], "no reaction, comment, branch or check run on GitHub"
    assert not fake_anthropic.requests
