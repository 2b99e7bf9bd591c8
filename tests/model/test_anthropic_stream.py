"""AnthropicModel streams every answer (https://docs.anthropic.com/en/api/messages-streaming) and keeps thinking
blocks as received, against the fake Anthropic API's Server-Sent Events, through the real SDK."""

from __future__ import annotations

import time

import pytest

from bot.core.errors import DecodeError
from bot.model.anthropic import AnthropicModel
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.anthropic_thinking import sign

TOOLS = [{"name": "bash", "description": "Run a command",
          "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}]
ASK = [{"role": "user", "content": "The tests fail on main; please fix them."}]
LONG = "I read the failing test, then the function it calls; the comparison is off by one. " * 4


def ask(model: AnthropicModel, **options) -> object:
    return model.complete(system="You fix bugs.", messages=ASK, tools=TOOLS, max_tokens=4096, **options)


def test_a_slow_answer_longer_than_the_read_timeout_completes_and_tells_its_progress(fake_anthropic):
    fake_anthropic.script([[{"type": "text", "text": LONG},
                            {"type": "tool_use", "name": "bash", "input": {"command": "python3 -m unittest -q"}}]])
    fake_anthropic.pace(0.12)  # each event within the timeout, the whole answer well past it
    model = AnthropicModel(fake_anthropic.settings().model, timeout_s=1.0, progress_every_s=0.5)
    heard: list[tuple[str, int]] = []
    began = time.monotonic()
    reply = ask(model, on_stream=lambda phase, tokens: heard.append((phase, tokens)))
    took = time.monotonic() - began
    assert took > 2.0, f"the answer took only {took:.1f}s: not slower than the timeout"
    assert reply.text == LONG.strip() and reply.tool_uses[0]["input"] == {"command": "python3 -m unittest -q"}
    assert reply.stop_reason == "tool_use" and reply.request_id.startswith("req_")
    assert len(fake_anthropic.requests) == 1  # no retry: nothing timed out
    assert fake_anthropic.requests[0].body["stream"] is True
    assert heard and {phase for phase, _ in heard} == {"writing"}
    assert [tokens for _, tokens in heard] == sorted(tokens for _, tokens in heard) and heard[-1][1] > 0
    print(f"a {took:.1f}s answer against a 1s read timeout; {len(heard)} progress reports")


def test_thinking_streams_first_and_its_block_is_kept_with_its_signature():
    with FakeAnthropic(thinking={"enabled"}) as fake:
        fake.script([[{"type": "thinking", "thinking": "The weekday check excludes Saturday."},
                      {"type": "text", "text": LONG}]]).pace(0.03)
        model = AnthropicModel(fake.settings().model, progress_every_s=0.1)
        heard: list[str] = []
        reply = ask(model, thinking={"type": "enabled", "budget_tokens": 2048},
                    on_stream=lambda phase, tokens: heard.append(phase))
    thinking = reply.content[0]
    assert thinking == {"type": "thinking", "thinking": "The weekday check excludes Saturday.",
                        "signature": sign("The weekday check excludes Saturday.")}
    assert reply.text == LONG.strip()
    assert heard[-1] == "writing" and heard.count("thinking") <= heard.index("writing") + 1
    assert fake.requests[0].body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert "temperature" not in fake.requests[0].body and "top_k" not in fake.requests[0].body
    assert reply.usage.output_tokens == fake.totals.output_tokens  # the thinking is billed as output


def test_an_error_event_mid_stream_retries_the_whole_request(fake_anthropic, caplog):
    fake_anthropic.script([[{"type": "text", "text": "Done."}]]).inject(529, mid_stream=True)
    sleeps: list[float] = []
    reply = ask(AnthropicModel(fake_anthropic.settings().model, sleep=sleeps.append))
    assert reply.text == "Done."
    assert [r.status for r in fake_anthropic.requests] == [200, 200] and len(sleeps) == 1
    assert "failed mid-answer with overloaded_error: Overloaded; retrying" in caplog.text


def test_an_error_event_on_every_attempt_gives_up_saying_so(fake_anthropic):
    fake_anthropic.script([[{"type": "text", "text": "Done."}]]).inject(529, mid_stream=True, times=3)
    model = AnthropicModel(fake_anthropic.settings().model, sleep=lambda s: None, max_attempts=3)
    with pytest.raises(DecodeError) as raised:
        ask(model)
    assert str(raised.value).startswith(f"the Anthropic API at {fake_anthropic.url} failed mid-answer with "
                                        "overloaded_error: Overloaded after 3 attempts")
    assert fake_anthropic.remaining == 1  # the scripted answer was never given


def test_a_stream_that_stalls_past_the_read_timeout_is_retried(fake_anthropic):
    fake_anthropic.script([[{"type": "text", "text": "Done."}]], by_position=True).pace(1.5)
    sleeps: list[float] = []
    model = AnthropicModel(fake_anthropic.settings().model, sleep=sleeps.append, timeout_s=0.5, max_attempts=2)
    with pytest.raises(DecodeError) as raised:
        ask(model)
    assert "after 2 attempts: the request timed out" in str(raised.value) and len(sleeps) == 1
    assert len(fake_anthropic.requests) == 2  # the whole request again, not a resumed stream
