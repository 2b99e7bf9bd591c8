"""The fake Anthropic API's context editing (`clear_tool_uses_20250919`), as the real API documents it
(https://docs.anthropic.com/en/docs/build-with-claude/context-editing): the SDK's beta Messages API against it."""

from __future__ import annotations

import anthropic
import pytest

from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.anthropic_edits import BETA, PLACEHOLDER
from tests.fakes.anthropic_rules import prompt_tokens

CLEAR = "clear_tool_uses_20250919"
BASH = {"name": "bash", "description": "Run a command", "input_schema": {"type": "object"}}


def conversation(results: int, size: int = 4_000) -> list[dict]:
    """A task and `results` tool calls, each answered by `size` characters of output."""
    messages: list[dict] = [{"role": "user", "content": "Read the logs."}]
    for n in range(results):
        messages += [{"role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_{n}", "name": "bash",
                                                        "input": {"command": f"cat log{n}"}}]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{n}",
                                                   "content": f"log {n} " + "x" * size}]}]
    return messages


def edit(trigger: int, keep: int, **more) -> dict:
    return {"edits": [{"type": CLEAR, "trigger": {"type": "input_tokens", "value": trigger},
                       "keep": {"type": "tool_uses", "value": keep}, **more}]}


@pytest.fixture
def fake():
    with FakeAnthropic(context_edits={CLEAR}) as fake:
        fake.script([[{"type": "text", "text": "Done."}]] * 4)
        yield fake


def client(fake: FakeAnthropic) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key=fake.api_key, base_url=fake.url, max_retries=0)


def ask(fake: FakeAnthropic, messages: list[dict], management: dict, *, stream: bool = False):
    params = dict(model="claude-test", max_tokens=1024, messages=messages, tools=[BASH], betas=[BETA],
                  context_management=management)
    if not stream:
        return client(fake).beta.messages.create(**params)
    with client(fake).beta.messages.stream(**params) as answer:
        return answer.get_final_message()


def test_past_the_trigger_the_oldest_results_are_cleared_and_the_model_reads_the_edited_prompt(fake):
    messages = conversation(6)
    full = prompt_tokens({"tools": [BASH], "messages": messages})
    answer = ask(fake, messages, edit(trigger=full - 10, keep=2))
    [applied] = answer.context_management.applied_edits
    assert (applied.type, applied.cleared_tool_uses) == (CLEAR, 4)
    results = [b for m in fake.requests[-1].body["messages"] for b in m["content"] if isinstance(m["content"], list)
               and b["type"] == "tool_result"]
    assert all(PLACEHOLDER not in str(b["content"]) for b in results)  # what the client sent stays whole
    read = answer.usage.input_tokens + answer.usage.cache_creation_input_tokens + answer.usage.cache_read_input_tokens
    assert read == fake.prompt_sizes[-1] == full - applied.cleared_input_tokens and read < full // 2


def test_below_the_trigger_or_short_of_clear_at_least_nothing_is_cleared(fake):
    messages = conversation(6)
    full = prompt_tokens({"tools": [BASH], "messages": messages})
    assert ask(fake, messages, edit(trigger=full, keep=2)).context_management.applied_edits == []
    at_least = {"clear_at_least": {"type": "input_tokens", "value": full}}
    assert ask(fake, messages, edit(trigger=0, keep=2, **at_least)).context_management.applied_edits == []
    assert fake.prompt_sizes == [full, full]


def test_a_streamed_answer_reports_the_edits_in_its_message_delta(fake):
    final = ask(fake, conversation(4), edit(trigger=0, keep=1), stream=True)
    assert final.context_management.applied_edits[0].cleared_tool_uses == 3
    assert final.content[0].text == "Done."


def test_an_edit_needs_the_beta_header_and_a_model_that_has_it(fake, fake_anthropic):
    with pytest.raises(anthropic.BadRequestError) as refused:
        client(fake).messages.create(model="claude-test", max_tokens=1024, messages=conversation(1), tools=[BASH],
                                     extra_body={"context_management": edit(0, 0)})
    assert refused.value.api_message == "context_management: Extra inputs are not permitted"
    fake_anthropic.script([[{"type": "text", "text": "Done."}]])
    with pytest.raises(anthropic.BadRequestError) as refused:
        ask(fake_anthropic, conversation(1), edit(0, 0))
    assert refused.value.api_message == (
        f"context_management.edits.0: '{CLEAR}' is not supported by the model claude-test")
