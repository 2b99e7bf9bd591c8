"""While a long answer streams, the loop tells it: throttled progress lines (`decode run`'s stderr) and
`model_progress` events (the tracking comment's last action), with thinking on through the real model client."""

from bot.agent.loop import run_agent
from bot.config import Budget
from bot.core.redact import Redactor
from bot.model.anthropic import AnthropicModel
from bot.model.thinking import ThinkingPlan
from bot.run.transcript import Transcript
from bot.sandbox import SandboxSpec, open_sandbox
from tests.fakes.anthropic_api import FakeAnthropic

THOUGHT = "The failing test compares dates; reading the helper it calls comes first. " * 6


def test_a_long_answer_is_told_while_it_streams(repo_factory, tmp_path):
    repo = repo_factory({"notes.txt": "hello\n"})
    sandbox = open_sandbox("local", SandboxSpec(workspace=repo))
    lines: list[str] = []
    with FakeAnthropic(thinking={"enabled"}) as fake:
        fake.script([[{"type": "thinking", "thinking": THOUGHT},
                      {"type": "tool_use", "name": "read", "input": {"path": "notes.txt"}}],
                     [{"type": "text", "text": "The notes say hello."}]]).pace(0.05)
        model = AnthropicModel(fake.settings().model, progress_every_s=0.4)
        try:
            with Transcript(tmp_path / "run", Redactor()) as transcript:
                result = run_agent(model=model, sandbox=sandbox, system="You read notes.", task="Read the notes.",
                                   budget=Budget(), recorder=transcript, progress=lines.append,
                                   thinking=ThinkingPlan({"type": "enabled", "budget_tokens": 2048}, 8192))
                events = transcript.events()
        finally:
            sandbox.close()
    assert result.completed and result.turns == 2
    told = [e for e in events if e["type"] == "model_progress"]
    assert told and told[0]["turn"] == 1 and told[0]["phase"] == "thinking" and told[0]["tokens"] > 0
    streaming = [line for line in lines if "…" in line]
    assert streaming[0].startswith("turn   1 | thinking… ") and " tokens (" in streaming[0]
    assert len(streaming) == len(told) < 12  # throttled: far fewer than the answer's deltas
    assert all(r.body["thinking"] == {"type": "enabled", "budget_tokens": 2048} for r in fake.requests)
    assert fake.requests[1].body["messages"][1]["content"][0]["type"] == "thinking"  # passed back as received
