"""AnthropicModel against the fake Anthropic API, through the real SDK."""

from __future__ import annotations

import copy
import socket
import traceback
from typing import Any

import pytest

from bot.config import Settings
from bot.core.errors import ConfigError, DecodeError
from bot.model import make_model
from bot.model.anthropic import AnthropicModel
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.anthropic_rules import count_cache_control

SYSTEM = "You are decode-bot. Fix the issue, run the tests, then summarise."
TOOLS = [
    {"name": name, "description": f"The {name} tool",
     "input_schema": {"type": "object", "properties": {arg: {"type": "string"}}}}
    for name, arg in (("bash", "command"), ("read", "path"))
]
LS = {"type": "tool_use", "name": "bash", "input": {"command": "ls"}}


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def model(fake_anthropic: FakeAnthropic, sleeps: list[float]) -> AnthropicModel:
    return AnthropicModel(fake_anthropic.settings().model, sleep=sleeps.append)


def ask(model: AnthropicModel, messages: list[dict[str, Any]] | None = None, tools: list | None = None) -> Any:
    messages = messages or [{"role": "user", "content": "The tests fail on main; please fix them."}]
    return model.complete(system=SYSTEM, messages=messages, tools=TOOLS if tools is None else tools, max_tokens=1024)


def answer(messages: list[dict[str, Any]], reply: Any, output: str) -> list[dict[str, Any]]:
    """The conversation after `reply`, with every tool call answered by `output`."""
    results = [{"type": "tool_result", "tool_use_id": b["id"], "content": output} for b in reply.tool_uses]
    return [*messages, {"role": "assistant", "content": reply.content}, {"role": "user", "content": results}]


def test_reply_carries_content_usage_model_and_request_id(fake_anthropic, model):
    fake_anthropic.script([[{"type": "text", "text": "Let me look."}, LS]])
    reply = ask(model)
    assert reply.content == [{"type": "text", "text": "Let me look."},
                             {"type": "tool_use", "id": "toolu_s001_1", "name": "bash", "input": {"command": "ls"}}]
    assert reply.stop_reason == "tool_use" and reply.text == "Let me look."
    sent = fake_anthropic.replies[-1]
    assert reply.model == sent["model"] == model.name
    assert reply.request_id == sent["request_id"]
    usage = sent["usage"]
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (usage["input_tokens"], usage["output_tokens"])
    assert reply.usage.cache_creation_tokens == usage["cache_creation_input_tokens"] > 0
    assert reply.usage.cache_read_tokens == 0


def test_the_conversation_is_read_from_the_cache_on_later_turns(fake_anthropic, model):
    fake_anthropic.script([[LS], [LS], [LS], "Fixed: the import was wrong."])
    messages = [{"role": "user", "content": "The tests fail on main; please fix them."}]
    replies = []
    for n in range(4):
        replies.append(ask(model, messages))
        messages = answer(messages, replies[-1], f"output {n}\n" * 20)
    assert replies[-1].stop_reason == "end_turn" and replies[-1].text == "Fixed: the import was wrong."
    assert replies[0].usage.cache_read_tokens == 0
    for before, after in zip(replies, replies[1:]):
        assert after.usage.cache_read_tokens == before.usage.total_input
    total = sum((r.usage for r in replies[1:]), replies[0].usage)
    assert total.cache_read_tokens == fake_anthropic.totals.cache_read_tokens
    assert fake_anthropic.cache_read_share > 0.5


def test_breakpoints_sit_on_last_tool_system_and_conversation_tail(fake_anthropic, model):
    fake_anthropic.script(["ok"])
    messages = [
        {"role": "user", "content": "fix it"},
        {"role": "assistant", "content": [{**LS, "id": "toolu_1"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x = 1"},
                                     {"type": "text", "text": "keep going"}]},
    ]
    before = copy.deepcopy((messages, TOOLS))
    ask(model, messages)
    body = fake_anthropic.requests[-1].body
    assert "cache_control" not in body["tools"][0] and body["tools"][1]["cache_control"] == {"type": "ephemeral"}
    assert body["system"] == [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]
    tail = body["messages"][-1]["content"]
    assert "cache_control" not in tail[0]
    assert tail[1] == {"type": "text", "text": "keep going", "cache_control": {"type": "ephemeral"}}
    assert count_cache_control(body) == 3
    assert (messages, TOOLS) == before, "the caller's messages and tools must not change"


def test_a_string_tail_becomes_a_marked_text_block(fake_anthropic, model):
    fake_anthropic.script(["ok"])
    ask(model, [{"role": "user", "content": "just text"}])
    assert fake_anthropic.requests[-1].body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "just text", "cache_control": {"type": "ephemeral"}}]}
    ]


def test_stale_breakpoints_in_the_history_are_dropped(fake_anthropic, model):
    fake_anthropic.script(["ok"])
    marked = {"type": "ephemeral"}
    notes = [{"type": "text", "text": f"note {n}", "cache_control": marked} for n in range(5)]
    messages = [{"role": "user", "content": notes}]
    tools = [{**TOOLS[0], "cache_control": marked}, TOOLS[1]]
    assert ask(model, messages, tools).text == "ok"
    assert count_cache_control(fake_anthropic.requests[-1].body) == 3
    assert messages[0]["content"][0]["cache_control"] == marked and tools[0]["cache_control"] == marked


def test_rate_limit_and_overload_are_retried_as_the_server_asks(fake_anthropic, model, sleeps):
    fake_anthropic.script(["done"]).inject(429, retry_after=7).inject(529).inject(429, retry_after_ms=1500)
    assert ask(model).text == "done"
    assert [r.status for r in fake_anthropic.requests] == [429, 529, 429, 200]
    assert sleeps[0] == 7 and sleeps[2] == 1.5
    assert 0 < sleeps[1] <= model.max_wait_s


def test_server_errors_and_dropped_connections_are_retried(fake_anthropic, model, sleeps):
    fake_anthropic.script(["done"]).inject(500).inject(503).inject(disconnect=True)
    assert ask(model).text == "done"
    assert len(fake_anthropic.requests) == 4 and len(sleeps) == 3


def test_waits_are_capped(fake_anthropic, sleeps):
    fake_anthropic.script(["done"]).inject(429, retry_after=3600).inject(502, times=4)
    model = AnthropicModel(fake_anthropic.settings().model, sleep=sleeps.append, max_wait_s=2.5)
    assert ask(model).text == "done"
    assert sleeps[0] == 2.5 and all(0 < s <= 2.5 for s in sleeps) and len(sleeps) == 5


def test_a_bad_request_is_not_retried_and_says_why(fake_anthropic, model, sleeps):
    fake_anthropic.script(["never"])
    messages = [{"role": "user", "content": "go"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_2", "content": "?"}]}]
    with pytest.raises(DecodeError) as caught:
        ask(model, messages)
    assert caught.value.status == 400
    assert "400 invalid_request_error" in str(caught.value) and "unexpected `tool_use_id`" in str(caught.value)
    assert len(fake_anthropic.requests) == 1 and sleeps == []


def test_giving_up_after_the_last_attempt(fake_anthropic, sleeps):
    fake_anthropic.script(["never"]).inject(529, times=10)
    model = AnthropicModel(fake_anthropic.settings().model, sleep=sleeps.append, max_attempts=3)
    with pytest.raises(DecodeError) as caught:
        ask(model)
    message = str(caught.value)
    assert caught.value.status == 529
    assert "529 overloaded_error: Overloaded" in message and "after 3 attempts" in message
    assert fake_anthropic.url in message
    assert len(fake_anthropic.requests) == 3 and len(sleeps) == 2


def test_a_wrong_key_is_refused_once_and_never_shown(fake_anthropic, sleeps):
    model = AnthropicModel(fake_anthropic.settings(anthropic_api_key="sk-ant-wrong-secret").model, sleep=sleeps.append)
    with pytest.raises(DecodeError) as caught:
        ask(model)
    assert caught.value.status == 401 and "check ANTHROPIC_API_KEY" in str(caught.value)
    assert "sk-ant-wrong-secret" not in str(caught.value)
    assert len(fake_anthropic.requests) == 1 and sleeps == []


def test_the_key_is_redacted_even_when_the_server_echoes_it(fake_anthropic, model):
    fake_anthropic.inject(400, message=f"bad credentials {fake_anthropic.api_key}")
    with pytest.raises(DecodeError) as caught:
        ask(model)
    assert fake_anthropic.api_key not in str(caught.value) and "[redacted]" in str(caught.value)
    printed = "".join(traceback.format_exception(caught.value))
    assert fake_anthropic.api_key not in printed, "a crash report must not show the key"


def test_an_unreachable_endpoint_names_the_url(sleeps):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
    settings = Settings(anthropic_api_key="sk-ant-x", anthropic_base_url=url)
    model = AnthropicModel(settings.model, sleep=sleeps.append, max_attempts=2)
    with pytest.raises(DecodeError) as caught:
        ask(model)
    assert f"cannot reach the Anthropic API at {url} after 2 attempts" in str(caught.value)
    assert "ANTHROPIC_BASE_URL" in str(caught.value) and len(sleeps) == 1


def test_the_endpoint_and_model_come_from_the_environment(fake_anthropic, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    env = {"ANTHROPIC_API_KEY": fake_anthropic.api_key, "ANTHROPIC_BASE_URL": fake_anthropic.url,
           "DECODE_MODEL": "claude-compatible-1"}
    fake_anthropic.script(["hi from the fake"])
    model = make_model(Settings.from_env(env).model)
    assert isinstance(model, AnthropicModel) and model.name == "claude-compatible-1"
    assert ask(model).text == "hi from the fake"
    assert fake_anthropic.requests[0].body["model"] == "claude-compatible-1"


def test_a_missing_key_is_a_config_error():
    with pytest.raises(ConfigError, match="^ANTHROPIC_API_KEY is not set: "):
        AnthropicModel(Settings(anthropic_api_key=None).model)


def test_context_management_goes_through_the_beta_api_and_its_edits_come_back(sleeps):
    clear = {"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 100},
             "keep": {"type": "tool_uses", "value": 1}}
    with FakeAnthropic(context_edits={"clear_tool_uses_20250919"}) as fake:
        fake.script([[LS], [LS], [{"type": "text", "text": "Done."}]])
        model = AnthropicModel(fake.settings().model, sleep=sleeps.append)
        messages = [{"role": "user", "content": "The tests fail on main; please fix them."}]
        for _ in range(2):
            messages = answer(messages, ask(model, messages), "x" * 4_000)
        reply = model.complete(system=SYSTEM, messages=messages, tools=TOOLS, max_tokens=1024,
                               context_management={"edits": [clear]})
        fake.script([[{"type": "text", "text": "Done."}]])
        plain = ask(model, messages)
    assert reply.text == "Done." and reply.context_edits == [
        {"type": "clear_tool_uses_20250919", "cleared_tool_uses": 1,
         "cleared_input_tokens": fake.replies[2]["context_management"]["applied_edits"][0]["cleared_input_tokens"]}]
    assert fake.requests[2].headers["anthropic-beta"] == "context-management-2025-06-27"
    assert fake.requests[2].body["context_management"] == {"edits": [clear]}
    assert reply.usage.total_input == fake.prompt_sizes[2] < fake.prompt_sizes[3]  # the API's count, after the edit
    assert plain.context_edits == [] and "anthropic-beta" not in fake.requests[3].headers
