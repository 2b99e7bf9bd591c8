"""The agent loop with the scripted model, a real local sandbox and a real transcript."""

import pytest

from bot.agent.loop import run_agent
from bot.config import Budget
from bot.model.scripted import ScriptedModel
from bot.core.redact import Redactor
from bot.sandbox import SandboxSpec, open_sandbox
from bot.run.transcript import Transcript, load_events


def bash(command):
    return [{"type": "tool_use", "name": "bash", "input": {"command": command}}]


@pytest.fixture
def env(repo_factory, tmp_path):
    repo = repo_factory({"a.txt": "one\n"})
    sb = open_sandbox("local", SandboxSpec(workspace=repo))
    transcript = Transcript(tmp_path / "run", Redactor(["sk-ant-api03-secretvalue0123456789"]))
    yield sb, transcript
    sb.close()
    transcript.close()


def run(env, turns, budget=Budget(), prices=None):
    sb, transcript = env
    return run_agent(model=ScriptedModel(turns), sandbox=sb, system="sys", task="do it",
                     budget=budget, recorder=transcript, prices=prices)


def test_the_final_answer_is_the_summary_and_tools_ran_in_the_sandbox(env):
    result = run(env, [bash("echo changed > a.txt; false"), [{"type": "text", "text": "All done."}]])
    assert result.completed and result.summary == "All done." and result.turns == 2
    assert env[0].read_file("a.txt") == b"changed\n"
    events = load_events(env[1].path)
    results = [e for e in events if e["type"] == "tool_result"]
    assert results[0]["is_error"] and "[exit code 1]" in results[0]["output"]
    assert events[-1]["type"] == "run_end" and events[-1]["stop_reason"] == "completed"


def test_turn_cap_stops_cleanly_and_keeps_the_work(env):
    turns = [bash(f"echo {i} >> a.txt") for i in range(10)]
    result = run(env, turns, Budget(max_turns=3))
    assert result.stop_reason == "max_turns" and result.turns == 3
    assert result.summary.startswith("**Incomplete: stopped at the turn limit.**")
    assert env[0].read_file("a.txt") == b"one\n0\n1\n2\n"


def test_cost_cap_uses_the_price_table(env):
    turns = [bash("true") for _ in range(10)]
    expensive = {"scripted": {"input": 1_000_000.0, "output": 0.0}}
    result = run(env, turns, Budget(max_cost_usd=0.5), prices=expensive)
    assert result.stop_reason == "max_cost" and result.turns == 1 and result.cost_usd > 0.5


def test_token_cap(env):
    result = run(env, [bash("true") for _ in range(10)], Budget(max_tokens=1))
    assert result.stop_reason == "max_tokens" and result.turns == 1


def test_wall_clock_cap_also_bounds_a_running_command(env):
    result = run(env, [[{"type": "tool_use", "name": "bash", "input": {"command": "sleep 30", "timeout": 300}}],
                       bash("true")], Budget(max_wall_s=2))
    assert result.stop_reason == "wall_clock"
    assert result.seconds < 10


def test_a_model_error_ends_the_run_with_the_reason(env):
    result = run(env, [bash("echo partial > b.txt")])  # the script runs out on turn 2
    assert result.stop_reason == "error" and "only 1 turns" in result.error
    assert env[0].read_file("b.txt") == b"partial\n"
    assert load_events(env[1].path)[-1]["stop_reason"] == "error"


def test_secrets_in_tool_output_never_reach_the_transcript(env):
    run(env, [bash("echo sk-ant-api03-secretvalue0123456789; echo visible-rest"), [{"type": "text", "text": "ok"}]])
    [result] = [e for e in load_events(env[1].path) if e["type"] == "tool_result"]
    assert "[REDACTED:" in result["output"] and "visible-rest" in result["output"]  # the output was recorded
    assert "secretvalue" not in env[1].path.read_text()


@pytest.mark.parametrize("configured", [True, False])
def test_a_token_cut_by_truncation_never_shows_its_prefix(repo_factory, tmp_path, configured):
    from bot.agent.truncate import MAX_BYTES

    token = "ghp_" + "Q7x" * 12  # a GitHub token shape; configured as a secret or not
    head = MAX_BYTES // 2 - 11  # the token straddles the end of the head that truncation keeps
    command = f"printf '%{head}s' '' | tr ' ' a; printf ' {token} '; printf '%100000s' '' | tr ' ' b"
    redactor = Redactor([token] if configured else [])
    sb = open_sandbox("local", SandboxSpec(workspace=repo_factory({"a.txt": "one\n"})))
    model = ScriptedModel([bash(command), [{"type": "text", "text": "ok"}]])
    try:
        with Transcript(tmp_path / "run", redactor) as transcript:
            run_agent(model=model, sandbox=sb, system="sys", task="do it", budget=Budget(),
                      recorder=transcript, redact=redactor.redact)
    finally:
        sb.close()
    [result] = [e for e in load_events(transcript.path) if e["type"] == "tool_result"]
    assert "output truncated" in result["output"] and "[REDACTED:" in result["output"]
    assert "ghp_Q7x" not in transcript.path.read_text()
