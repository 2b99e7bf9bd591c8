"""Prompt caching over a long session, by the fake API's prefix accounting."""

from bot.agent.loop import run_agent
from bot.config import Budget
from bot.model.anthropic import AnthropicModel
from bot.core.redact import Redactor
from bot.sandbox import SandboxSpec, open_sandbox
from bot.run.transcript import Transcript


def test_a_30_turn_session_reads_at_least_85_percent_of_its_input_from_the_cache(
    fake_anthropic, repo_factory, tmp_path
):
    repo = repo_factory({f"src/module_{i}.py": f"def f{i}():\n    return {i}\n" * 20 for i in range(10)})
    turns = []
    for i in range(29):
        tool = [
            {"type": "tool_use", "name": "read", "input": {"path": f"src/module_{i % 10}.py"}},
            {"type": "tool_use", "name": "bash", "input": {"command": f"grep -c return src/module_{i % 10}.py"}},
            {"type": "tool_use", "name": "grep", "input": {"pattern": f"return {i % 10}$"}},
        ][i % 3]
        turns.append([{"type": "text", "text": f"Step {i}: looking further."}, tool])
    turns.append([{"type": "text", "text": "Done reading."}])
    fake_anthropic.script(turns)
    sandbox = open_sandbox("local", SandboxSpec(workspace=repo))
    try:
        with Transcript(tmp_path / "run", Redactor()) as transcript:
            result = run_agent(model=AnthropicModel(fake_anthropic.settings().model), sandbox=sandbox,
                               system="You are a careful engineer. " * 50, task="Read the code.",
                               budget=Budget(), recorder=transcript)
    finally:
        sandbox.close()
    assert result.completed and result.turns == 30
    share = fake_anthropic.cache_read_share
    assert share >= 0.85, f"only {share:.1%} of input tokens were cache reads"
    # what the loop counted agrees with what the API reported
    assert result.usage.cache_read_tokens == fake_anthropic.totals.cache_read_tokens
    print(f"cache reads: {share:.1%} of {fake_anthropic.totals.total_input:,} input tokens")
