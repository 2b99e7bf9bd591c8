"""The fake Anthropic API's thinking rules and its Server-Sent Events, as the real API documents them
(https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking,
https://docs.anthropic.com/en/api/messages-streaming)."""

from __future__ import annotations

import json

import anthropic
import httpx2
import pytest

from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.anthropic_thinking import sign

ASK = [{"role": "user", "content": "hi"}]


@pytest.fixture
def fake() -> FakeAnthropic:
    with FakeAnthropic(thinking={"enabled"}) as fake:
        fake.script([[{"type": "text", "text": "Hello there."}]], by_position=True)
        yield fake


def refusal(fake: FakeAnthropic, **params) -> str:
    client = anthropic.Anthropic(api_key=fake.api_key, base_url=fake.url, max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.messages.create(model="claude-test", messages=ASK, **{"max_tokens": 4096, **params})
    return refused.value.api_message


def test_a_thinking_request_must_fit_the_rules(fake):
    enabled = {"type": "enabled", "budget_tokens": 2048}
    assert refusal(fake, thinking={"type": "enabled", "budget_tokens": 1000}) == (
        "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
    assert refusal(fake, thinking=enabled, max_tokens=2048).startswith(
        "`max_tokens` must be greater than `thinking.budget_tokens`")
    assert refusal(fake, thinking=enabled, extra_body={"temperature": 0.2}) == (
        "`temperature` may only be set to 1 when thinking is enabled.")
    assert refusal(fake, thinking=enabled, extra_body={"top_k": 5}) == "`top_k` may not be set when thinking is enabled."
    assert refusal(fake, thinking={"type": "adaptive"}) == (
        "thinking.type: 'adaptive' thinking is not supported by claude-test")
    assert not fake.replies


def test_a_model_without_thinking_refuses_a_thinking_request(fake_anthropic):
    assert refusal(fake_anthropic, thinking={"type": "enabled", "budget_tokens": 2048}) == (
        "thinking.type: 'enabled' thinking is not supported by claude-test")


def test_a_streamed_answer_is_the_documented_event_sequence(fake):
    body = {"model": "claude-test", "max_tokens": 4096, "messages": ASK, "stream": True,
            "thinking": {"type": "enabled", "budget_tokens": 2048}}
    response = httpx2.post(f"{fake.url}/v1/messages", json=body, timeout=10,
                           headers={"x-api-key": fake.api_key, "anthropic-version": "2023-06-01"})
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    frames = [frame for frame in response.text.split("\n\n") if frame]
    events = [(f.split("\n")[0].removeprefix("event: "), json.loads(f.split("\n")[1].removeprefix("data: ")))
              for f in frames]
    names = [name for name, _ in events]
    assert all(name == data["type"] for name, data in events)
    assert names[:3] == ["message_start", "ping", "content_block_start"] and names[-2:] == ["message_delta",
                                                                                          "message_stop"]
    deltas = [data["delta"] for name, data in events if name == "content_block_delta"]
    thought = "".join(d["thinking"] for d in deltas if d["type"] == "thinking_delta")
    assert [d["signature"] for d in deltas if d["type"] == "signature_delta"] == [sign(thought)]
    assert "".join(d["text"] for d in deltas if d["type"] == "text_delta") == "Hello there."
    assert events[-2][1]["usage"]["output_tokens"] == fake.replies[0]["usage"]["output_tokens"]
    assert events[0][1]["message"]["content"] == [] and events[0][1]["message"]["usage"]["input_tokens"] > 0
