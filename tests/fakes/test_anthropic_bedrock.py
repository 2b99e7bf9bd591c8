"""The fake Bedrock's streamed answers are the AWS event stream encoding that botocore, and through it the SDK's
Bedrock client, decodes: CRCs, headers and base64 `bytes` as Bedrock sends them."""

from __future__ import annotations

import base64
import json

from anthropic.lib.bedrock._stream_decoder import AWSEventStreamDecoder
from botocore.eventstream import EventStreamBuffer

from tests.fakes.anthropic_bedrock import EventStreamed
from tests.fakes.anthropic_rules import ApiError
from tests.fakes.anthropic_stream import broken_off, stream_events

REPLY = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "stop_reason": "tool_use",
         "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 20},
         "content": [{"type": "thinking", "thinking": "First the tests, then the fix.", "signature": "c2ln"},
                     {"type": "text", "text": "Running them."},
                     {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "pytest -q"}}]}


def decoded(events: list) -> list:
    """The messages botocore reads from the fake's frames, fed to it a few bytes at a time as a socket would."""
    wire, buffer, messages = b"".join(EventStreamed(events).chunks()), EventStreamBuffer(), []
    for at in range(0, len(wire), 7):
        buffer.add_data(wire[at:at + 7])
        messages += list(buffer)
    return messages


def test_every_event_is_a_chunk_whose_bytes_are_the_event_json():
    events = stream_events(REPLY)
    messages = decoded(events)
    assert [m.headers for m in messages] == [
        {":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"}] * len(events)
    assert [json.loads(base64.b64decode(json.loads(m.payload)["bytes"])) for m in messages] == [e for _, e in events]
    sse = list(AWSEventStreamDecoder().iter_bytes(iter(EventStreamed(events).chunks())))
    assert [s.event for s in sse] == [name for name, _ in events]


def test_a_failure_mid_answer_is_an_exception_message_the_sdk_reads_as_an_error_event():
    events = broken_off(REPLY, ApiError(529, "Overloaded"))
    last = decoded(events)[-1]
    assert last.headers == {":exception-type": "serviceUnavailableException", ":content-type": "application/json",
                            ":message-type": "exception"}
    assert last.to_response_dict()["status_code"] == 400 and json.loads(last.payload) == {"message": "Overloaded"}
    sse = list(AWSEventStreamDecoder().iter_bytes(iter(EventStreamed(events).chunks())))
    assert sse[-1].event == "error" and sse[-1].json() == {
        "type": "error", "error": {"type": "serviceUnavailableException", "message": "Overloaded"}}
