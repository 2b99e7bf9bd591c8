"""The fake Anthropic API answers the real SDK the way the real API would."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2
import pytest

from tests.fakes.anthropic_api import FakeAnthropic

TOOLS = [
    {"name": name, "description": f"The {name} tool",
     "input_schema": {"type": "object", "properties": {arg: {"type": "string"}}}}
    for name, arg in (("bash", "command"), ("read", "path"))
]
CC = {"type": "ephemeral"}
LS = {"type": "tool_use", "name": "bash", "input": {"command": "ls"}}
HEADERS = {"anthropic-version": "2023-06-01", "content-type": "application/json"}
HELLO = b'{"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}'


@pytest.fixture
def client(fake_anthropic: FakeAnthropic) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key=fake_anthropic.api_key, base_url=fake_anthropic.url, max_retries=0)


def send(client: anthropic.Anthropic, messages: list[dict[str, Any]], **params: Any) -> Any:
    return client.messages.create(model="claude-test", max_tokens=100, messages=messages, **params)


def tool_call(n: int) -> list[dict[str, Any]]:
    """The assistant calling bash as toolu_<n>, and the user's tool_result for it."""
    return [
        {"role": "assistant", "content": [{**LS, "id": f"toolu_{n}"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": f"file{n}.py"}]},
    ]


def raw_post(fake: FakeAnthropic, headers: dict[str, str], body: bytes | None = None) -> httpx2.Response:
    body = HELLO if body is None else body
    return httpx2.post(f"{fake.url}/v1/messages", headers=headers, content=body)


def test_reply_is_a_messages_api_response(fake_anthropic, client):
    fake_anthropic.script([[{"type": "text", "text": "looking"}, LS]])
    message = send(client, [{"role": "user", "content": "list files"}], tools=TOOLS)
    assert message.id.startswith("msg_") and message.role == "assistant" and message.model == "claude-test"
    assert message.stop_reason == "tool_use" and message.stop_sequence is None
    assert [b.type for b in message.content] == ["text", "tool_use"]
    assert message.content[1].input == {"command": "ls"} and message.content[1].id
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0
    assert message._request_id and message._request_id.startswith("req_")
    assert fake_anthropic.requests[0].body["messages"] == [{"role": "user", "content": "list files"}]
    assert fake_anthropic.requests[0].headers["anthropic-version"]


def test_a_text_only_turn_ends_the_turn(fake_anthropic, client):
    fake_anthropic.script(["all done"])
    assert send(client, [{"role": "user", "content": "hi"}]).stop_reason == "end_turn"


@pytest.mark.parametrize(
    ("messages", "tools", "expected"),
    [
        ([], TOOLS, "at least one message"),
        ([{"role": "assistant", "content": "hi"}], TOOLS, 'first message must use the "user" role'),
        ([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], TOOLS, "roles must alternate"),
        ([{"role": "user", "content": "go"}, *tool_call(1)[:1], {"role": "user", "content": "ok"}], TOOLS,
         "`tool_use` ids were found without `tool_result` blocks immediately after: toolu_1"),
        ([{"role": "user", "content": "go"}, *tool_call(1)[:1],
          {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "x"}]}], TOOLS,
         "unexpected `tool_use_id` found in `tool_result` blocks: toolu_9"),
        ([{"role": "user", "content": "go"}, *tool_call(1)[:1],
          {"role": "user", "content": [{"type": "text", "text": "here"},
                                       {"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"}]}], TOOLS,
         "must come first"),
        ([{"role": "user", "content": "go"}, *tool_call(1)], [], "must define tools"),
        ([{"role": "user", "content": "go"}, *tool_call(1), *tool_call(1)], TOOLS, "ids must be unique"),
        ([{"role": "user", "content": "   "}], TOOLS, "non-whitespace text"),
        ([{"role": "user", "content": []}], TOOLS, "must have non-empty content"),
        ([{"role": "user", "content": "hi"}], [{"name": "bash"}], "input_schema: Field required"),
        ([{"role": "user", "content": "hi"}], [{**TOOLS[0], "name": "run shell"}], "tools.0.name"),
        ([{"role": "user", "content": "hi"}], [TOOLS[0], TOOLS[0]], "Tool names must be unique"),
    ],
)
def test_malformed_requests_get_the_apis_400(fake_anthropic, client, messages, tools, expected):
    fake_anthropic.script(["never sent"])
    with pytest.raises(anthropic.BadRequestError) as caught:
        send(client, messages, tools=tools)
    assert caught.value.type == "invalid_request_error"
    assert expected in caught.value.api_message
    assert caught.value.request_id and fake_anthropic.remaining == 1


def test_a_well_formed_tool_exchange_is_accepted(fake_anthropic, client):
    fake_anthropic.script(["fine"])
    send(client, [{"role": "user", "content": "go"}, *tool_call(1), *tool_call(2)], tools=TOOLS)
    assert fake_anthropic.requests[-1].status == 200


def test_more_than_four_breakpoints_are_refused(fake_anthropic, client):
    fake_anthropic.script(["never sent"])
    content = [{"type": "text", "text": f"part {n}", "cache_control": CC} for n in range(4)]
    system = [{"type": "text", "text": "be brief", "cache_control": CC}]
    with pytest.raises(anthropic.BadRequestError, match="A maximum of 4 blocks with cache_control"):
        send(client, [{"role": "user", "content": content}], system=system)


@pytest.mark.parametrize(
    ("headers", "status", "expected"),
    [
        ({"anthropic-version": "2023-06-01", "content-type": "application/json"}, 401, "x-api-key header is required"),
        ({"x-api-key": "sk-wrong", "anthropic-version": "2023-06-01", "content-type": "application/json"}, 401,
         "invalid x-api-key"),
        ({"x-api-key": "KEY", "content-type": "application/json"}, 400, "anthropic-version"),
        ({"x-api-key": "KEY", "anthropic-version": "2023-06-01", "content-type": "text/plain"}, 400, "content-type"),
    ],
)
def test_headers_are_checked_first(fake_anthropic, headers, status, expected):
    headers = {k: v.replace("KEY", fake_anthropic.api_key) for k, v in headers.items()}
    response = raw_post(fake_anthropic, headers)
    assert response.status_code == status
    body = response.json()
    assert body["type"] == "error" and expected in body["error"]["message"]
    assert body["error"]["type"] == ("authentication_error" if status == 401 else "invalid_request_error")
    assert response.headers["request-id"].startswith("req_")


def test_the_documented_x_api_key_header_is_accepted(fake_anthropic):
    fake_anthropic.script(["hello"])
    response = raw_post(fake_anthropic, {**HEADERS, "x-api-key": fake_anthropic.api_key})
    assert response.status_code == 200 and response.json()["content"] == [{"type": "text", "text": "hello"}]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}', "model: Field required"),
        (b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}', "max_tokens: Field required"),
        (b"{not json", "error parsing the body"),
    ],
)
def test_missing_fields_are_refused(fake_anthropic, body, expected):
    response = raw_post(fake_anthropic, {**HEADERS, "x-api-key": fake_anthropic.api_key}, body)
    assert response.status_code == 400 and expected in response.json()["error"]["message"]


def test_an_exhausted_script_answers_500_saying_so(fake_anthropic, client):
    fake_anthropic.script(["only one"])
    send(client, [{"role": "user", "content": "hi"}])
    with pytest.raises(anthropic.InternalServerError) as caught:
        send(client, [{"role": "user", "content": "hi"}])
    assert caught.value.status_code == 500 and caught.value.type == "api_error"
    assert "script is exhausted after 1 turns" in caught.value.api_message


def test_faults_come_before_the_reply_and_consume_themselves(fake_anthropic, client):
    fake_anthropic.script(["finally"]).inject(429, retry_after=3).inject(529, times=2)
    with pytest.raises(anthropic.RateLimitError) as caught:
        send(client, [{"role": "user", "content": "hi"}])
    assert caught.value.response.headers["retry-after"] == "3" and caught.value.type == "rate_limit_error"
    for _ in range(2):
        with pytest.raises(anthropic.APIStatusError) as caught:
            send(client, [{"role": "user", "content": "hi"}])
        assert caught.value.status_code == 529 and caught.value.type == "overloaded_error"
        assert "retry-after" not in caught.value.response.headers
    assert send(client, [{"role": "user", "content": "hi"}]).content[0].text == "finally"
    assert [r.status for r in fake_anthropic.requests] == [429, 529, 529, 200]


def test_a_dropped_connection_is_a_connection_error(fake_anthropic, client):
    fake_anthropic.script(["after the drop"]).inject(disconnect=True)
    with pytest.raises(anthropic.APIConnectionError):
        send(client, [{"role": "user", "content": "hi"}])
    assert send(client, [{"role": "user", "content": "hi"}]).content[0].text == "after the drop"


def conversation(turns: int, system: str = "You are a careful engineer.", tools: list | None = None) -> dict[str, Any]:
    """A request after `turns` tool calls, with breakpoints on tools, system and the tail."""
    messages = [{"role": "user", "content": [{"type": "text", "text": "Fix the failing test in tests/test_app.py"}]}]
    for n in range(turns):
        messages += tool_call(n)
    messages[-1] = {**messages[-1], "content": [{**messages[-1]["content"][-1], "cache_control": CC}]}
    tools = TOOLS if tools is None else tools
    marked = [*tools[:-1], {**tools[-1], "cache_control": CC}] if tools else []
    return {"messages": messages, "system": [{"type": "text", "text": system, "cache_control": CC}], "tools": marked}


def test_a_growing_conversation_reads_its_prefix_from_the_cache(fake_anthropic, client):
    fake_anthropic.script(["ok"] * 4)
    usages = [send(client, **conversation(turns)).usage for turns in range(4)]
    first = usages[0]
    assert first.cache_read_input_tokens == 0 and first.cache_creation_input_tokens > 0
    for before, after in zip(usages, usages[1:]):
        prompt_before = before.cache_read_input_tokens + before.cache_creation_input_tokens + before.input_tokens
        assert after.cache_read_input_tokens == prompt_before
        assert after.cache_creation_input_tokens > 0 and after.input_tokens == 0
    totals = fake_anthropic.totals
    assert totals.cache_read_tokens == sum(u.cache_read_input_tokens for u in usages)
    prompts = [u.cache_read_input_tokens + u.cache_creation_input_tokens + u.input_tokens for u in usages]
    assert totals.total_input == sum(prompts)
    assert 0.5 < fake_anthropic.cache_read_share < 1


def test_a_changed_system_prompt_reads_nothing_past_the_tools(fake_anthropic, client):
    fake_anthropic.script(["ok"] * 4)
    send(client, **conversation(0, tools=[]))
    fresh = send(client, **conversation(0, system="You are a different engineer.", tools=[])).usage
    assert fresh.cache_read_input_tokens == 0
    first = send(client, **conversation(1)).usage
    changed = send(client, **conversation(1, system="You are a hasty engineer.")).usage
    assert 0 < changed.cache_read_input_tokens < first.cache_creation_input_tokens


def test_no_breakpoints_means_no_caching(fake_anthropic, client):
    fake_anthropic.script(["ok"] * 2)
    for _ in range(2):
        usage = send(client, [{"role": "user", "content": "same prompt"}], system="same system").usage
        assert usage.cache_read_input_tokens == 0 and usage.cache_creation_input_tokens == 0
        assert usage.input_tokens > 0


def test_the_lookback_reaches_only_twenty_blocks_back(fake_anthropic, client):
    fake_anthropic.script(["ok"] * 3)
    first = send(client, **conversation(0)).usage
    whole_prompt = first.cache_creation_input_tokens
    assert send(client, **conversation(5)).usage.cache_read_input_tokens == whole_prompt
    far = send(client, **conversation(16)).usage.cache_read_input_tokens
    assert 0 < far < whole_prompt


def test_prefixes_below_the_minimum_are_not_cached():
    with FakeAnthropic(min_cache_tokens=100_000) as fake:
        fake.script(["ok"] * 2)
        client = anthropic.Anthropic(api_key=fake.api_key, base_url=fake.url, max_retries=0)
        for _ in range(2):
            usage = send(client, **conversation(1)).usage
            assert usage.cache_read_input_tokens == 0 and usage.cache_creation_input_tokens == 0
