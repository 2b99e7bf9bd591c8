"""Best of N (bot/run/attempts.py): the pick as a pure function, and `decode run --attempts 3` as a user runs it,
through the console script, the fake Anthropic API (one scripted session per attempt) and real bwrap and docker
sandboxes: one attempt fails `verify`, one passes with a large diff, one with a small one; the small one is
delivered, and every attempt is listed."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from bot.run.attempts import Attempt, pick, why
from tests.conftest import make_repo
from tests.sandbox.conftest import require
from tests.support.cli import DECODE, decode_run, printed, run_env

TASK = "greet(name) should say 'Hello, NAME!'"
GREET = "def greet(name):\n    return 'Hello ' + name\n"
SMALL = "    return f'Hello, {name}!'"
VERIFY = "python3 -c \"import greet; assert greet.greet('Ann') == 'Hello, Ann!'\""
LARGE = "".join(f"# note {n}: a greeting is polite\n" for n in range(30)) + f"def greet(name):\n{SMALL}\n"
ATTEMPTS = [
    [[{"type": "tool_use", "name": "edit", "input": {"path": "greet.py", "old_string": "    return 'Hello ' + name",
                                                      "new_string": "    return 'Hi ' + name"}}],
     "Done.", "Still done.", "Done again."],
    [[{"type": "tool_use", "name": "write", "input": {"path": "greet.py", "content": LARGE}}], "Rewrote greet.py."],
    [[{"type": "tool_use", "name": "edit", "input": {"path": "greet.py", "old_string": "    return 'Hello ' + name",
                                                      "new_string": SMALL}}], "greet says Hello, NAME! now."],
]


def attempt(number: int, verified: str, lines: int, cost: float = 0.1, error: str | None = None) -> Attempt:
    return Attempt(number, verified, lines, turns=2, cost_usd=cost, error=error)


@pytest.mark.parametrize("attempts, chosen", [
    ([attempt(1, "failed", 2), attempt(2, "passed", 40), attempt(3, "passed", 2)], 3),
    ([attempt(1, "passed", 5, cost=0.3), attempt(2, "passed", 5, cost=0.2)], 2),  # a tie: the cheapest
    ([attempt(1, "passed", 5), attempt(2, "passed", 5)], 1),  # a full tie: the first
    ([attempt(1, "failed", 1), attempt(2, "failed", 2)], None),  # nothing passed: nothing published
    ([attempt(1, "none", 0), attempt(2, "none", 9), attempt(3, "none", 3)], 3),  # no verify: fewest that changed
    ([attempt(1, "passed", 1, error="the sandbox died"), attempt(2, "passed", 4)], 2),
    ([attempt(1, "none", 0), attempt(2, "none", 0)], None),
])
def test_pick_is_the_first_that_passed_verify_then_the_fewest_changed_lines(attempts, chosen):
    picked = pick(attempts)
    assert (picked.number if picked else None) == chosen


def test_without_verify_the_pick_says_there_was_nothing_to_verify_by():
    attempts = [attempt(1, "none", 4), attempt(2, "none", 2)]
    assert "nothing to verify by" in why(attempts, pick(attempts))


@pytest.mark.parametrize("mode, flags, config", [
    ("bwrap", ("--attempts", "3"), ""),
    ("docker", (), "attempts: 3\n"),  # decode.yml's, when no flag says otherwise
])
def test_three_attempts_publish_the_small_one_that_passed_verify(fake_anthropic, tmp_path, mode, flags, config):
    require(mode)
    repo = make_repo(tmp_path / "greet", {"greet.py": GREET, ".github/decode.yml":
                                          f"verify:\n  - {json.dumps(VERIFY)}\nverify_rounds: 1\n{config}"})
    fake_anthropic.sessions([(TASK, turns) for turns in ATTEMPTS])
    done = decode_run(fake_anthropic, tmp_path, repo, TASK, mode=mode, flags=flags)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert len(rows) == 3, done.stdout
    verdicts = {row.split("|")[1].strip(): row.split("|")[2].strip() for row in rows}
    assert sorted(verdicts.values()) == ["failed", "passed", "passed"], rows
    published = [row for row in rows if "(published)" in row]
    assert len(published) == 1 and published[0].split("|")[3].strip() == "2", rows
    assert "it passed `verify`, with the fewest changed lines" in done.stdout
    branch = printed(done.stdout, "branch")
    shown = subprocess.run(["git", "show", f"{branch}:greet.py"], cwd=repo, capture_output=True, text=True, check=True)
    assert shown.stdout == f"def greet(name):\n{SMALL}\n"
    assert len(list((tmp_path / "data" / "runs").iterdir())) == 3  # each attempt its own run directory
    assert sum(1 for line in done.stderr.splitlines() if line.startswith("[attempt ")) > 3


@pytest.mark.parametrize("value", ["0", "6", "'3'", "true"])
def test_decode_yml_attempts_is_1_to_5(value):
    from bot.core.errors import ConfigError
    from bot.run.repo_config import config_of

    assert config_of(b"attempts: 5\n").attempts == 5 and config_of(b"").attempts == 1
    with pytest.raises(ConfigError, match=r"\.github/decode\.yml: 'attempts' must be a whole number from 1 to 5"):
        config_of(f"attempts: {value}\n".encode())


def test_attempts_flag_out_of_range_is_one_line_and_exit_2(fake_anthropic, tmp_path):
    repo = make_repo(tmp_path / "greet", {"greet.py": GREET})
    done = decode_run(fake_anthropic, tmp_path, repo, TASK, flags=("--attempts", "9"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "--attempts must be a whole number from 1 to 5" in done.stderr and not fake_anthropic.requests


def first_turn_paid(runs: Path) -> bool:
    """Whether an attempt's first model turn is in its transcript (so its cost is paid: the loop pays before it
    records the answer)."""
    return any("model_response" in path.read_text() for path in runs.glob("*/transcript.jsonl"))


def test_the_cost_cap_is_the_whole_runs_and_attempts_it_leaves_no_budget_for_say_so(fake_anthropic, tmp_path):
    """DECODE_MAX_COST_USD=0.001 and three attempts: the first to set up pays more than that for its first turn
    (the fake's usage at the built-in prices) and stops at the cap; the other two, held in setup until that turn
    is paid, find the run's budget spent and make no request: each of them is listed as not started. The one that
    started is delivered as a single run stopped at the cap would be, exit 3."""
    gate = tmp_path / "gate"
    gate.mkdir()
    hold = f"mkdir {gate}/first 2>/dev/null || while [ ! -e {gate}/go ]; do sleep 0.05; done"
    repo = make_repo(tmp_path / "greet", {"greet.py": GREET, ".github/decode.yml": f"setup:\n  - {json.dumps(hold)}\n"})
    fake_anthropic.sessions([(TASK, turns) for turns in ATTEMPTS])
    env = run_env(fake_anthropic, tmp_path, DECODE_MAX_COST_USD="0.001")
    with subprocess.Popen([DECODE, "run", "--repo", str(repo), "--attempts", "3", TASK], env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        deadline = time.monotonic() + 120
        while not first_turn_paid(tmp_path / "data" / "runs") and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        (gate / "go").touch()
        out, err = proc.communicate(timeout=180)
    rows = [line.split("|") for line in out.splitlines() if line.startswith("| ") and line[2].isdigit()]
    spent = "the run's budget (DECODE_MAX_COST_USD=0.001) was spent"
    assert sorted(row[2].strip() for row in rows) == [f"not started: {spent}"] * 2 + [f"stopped: {spent}"], out + err
    assert len(fake_anthropic.requests) == 1  # the whole run paid for one turn, not one per attempt
    stopped = 1 + [row[2].strip() for row in sorted(rows, key=lambda r: int(r[1]))].index(f"stopped: {spent}")
    assert f"none of the 3 attempts finished (each one's row says why): delivering attempt {stopped} as it ended" \
        in err, err
    assert proc.returncode == 3, "the run stopped at its budget, as a single run stopped so would: exit 3"
