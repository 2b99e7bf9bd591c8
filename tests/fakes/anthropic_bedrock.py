"""A fake of Amazon Bedrock's runtime on 127.0.0.1, serving Anthropic models through a `FakeAnthropic`.

`InvokeModel` as https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_InvokeModel.html and
https://docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-anthropic-claude-messages.html
describe it: `POST /model/{modelId}/invoke` with the Messages body, `anthropic_version` in the body
(`bedrock-2023-05-31`, or the SDK's newer one) and neither `model` (the path names it) nor `stream`.
`InvokeModelWithResponseStream` (`POST /model/{modelId}/invoke-with-response-stream`, same body) answers in
the AWS event stream encoding (`application/vnd.amazon.eventstream`): one `chunk` event per Messages
streaming event of the wrapped fake (tests/fakes/anthropic_stream.py), its JSON base64-encoded in the payload's
`bytes`; a stream that fails after its 200 ends with an `exception` message (`serviceUnavailableException` for
an overload, `throttlingException`, `internalServerException`, ...). Every request must be signed with AWS
Signature Version 4 for the service `bedrock` in the fake's region: the fake recomputes the signature with
botocore's own `SigV4Auth` from the test's secret key and answers 403 `InvalidSignatureException` when it
does not match, as Bedrock does. The Messages logic (validation, scripted turns, token accounting) is the
wrapped `FakeAnthropic`'s; its errors before an answer come back in Bedrock's shape (`{"message": ...}` and
`x-amzn-ErrorType`). Bedrock has no token counting in the SDK and no Models API: other routes are 404.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import hashlib
import hmac
import json
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest
from anthropic._constants import ANTHROPIC_API_VERSION

from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.anthropic_gateway import Gateway
from tests.fakes.anthropic_stream import Streamed

# The documented version, and the one this SDK sends (anthropic._constants.ANTHROPIC_API_VERSION).
VERSIONS = ("bedrock-2023-05-31", ANTHROPIC_API_VERSION)
INVOKE = re.compile(r"^/model/(?P<model>[^/]+)/invoke(?P<streamed>-with-response-stream)?$")
AUTHORIZATION = re.compile(r"^AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/"
                           r"(?P<service>[^/]+)/aws4_request, SignedHeaders=(?P<signed>[^,]+), "
                           r"Signature=(?P<signature>[0-9a-f]{64})$")
# The exception a stream that fails after its 200 ends with, for the Messages API's `error` event type.
STREAM_EXCEPTIONS = {"overloaded_error": "serviceUnavailableException", "rate_limit_error": "throttlingException",
                     "api_error": "internalServerException", "invalid_request_error": "validationException"}
ERROR_TYPES = {400: "ValidationException", 403: "AccessDeniedException", 404: "ResourceNotFoundException",
               429: "ThrottlingException", 500: "InternalServerException", 503: "ServiceUnavailableException",
               529: "ServiceUnavailableException"}
BAD_SIGNATURE = ("The request signature we calculated does not match the signature you provided. Check your AWS "
                 "Secret Access Key and signing method. Consult the service documentation for details.")


class BedrockError(Exception):
    def __init__(self, status: int, message: str, error_type: str) -> None:
        super().__init__(message)
        self.status, self.message, self.error_type = status, message, error_type


@dataclass
class FakeBedrock(Gateway):
    """Start it, script `messages` (the wrapped fake), point the SDK at `url` with `env()`; `requests` holds every
    request, signed or not."""

    access_key: str = "AKIAFAKEDECODE0000001"
    secret_key: str = "fake/secret/key/for+decode+bedrock+tests0"
    region: str = "us-east-1"

    def env(self) -> dict[str, str]:
        """The variables a user sets for this endpoint (the SDK's and AWS's own names)."""
        return {"DECODE_PROVIDER": "bedrock", "AWS_REGION": self.region, "AWS_ACCESS_KEY_ID": self.access_key,
                "AWS_SECRET_ACCESS_KEY": self.secret_key, "ANTHROPIC_BEDROCK_BASE_URL": self.url,
                "AWS_EC2_METADATA_DISABLED": "true"}

    def handle(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, dict, Any] | None:
        """Answer one request: (status, headers, JSON body or a stream of events), or None to drop the
        connection."""
        self.record(method, path, headers, raw)
        try:
            inner = self._checked(method, path, headers, raw)
        except BedrockError as e:
            return e.status, {"x-amzn-ErrorType": f"{e.error_type}:http://internal.amazon.com/coral/"}, \
                {"message": e.message}
        answer = self.forward("/v1/messages", inner)
        if answer is None:
            return None
        status, extra, payload = answer
        request_id = extra.pop("request-id", "")
        extra["x-amzn-RequestId"] = request_id
        if status != 200:
            extra["x-amzn-ErrorType"] = ERROR_TYPES.get(status, "InternalServerException")
            return status, extra, {"message": payload["error"]["message"]}
        if isinstance(payload, Streamed):
            extra["x-amzn-bedrock-content-type"] = "application/json"
            return status, extra, EventStreamed(payload.events, payload.pace_s)
        return status, extra, payload

    def _checked(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> dict[str, Any]:
        """The wrapped Messages API's body for a signed, well-formed InvokeModel (or its streamed form) request:
        the model from the path, `stream` from the route."""
        route = INVOKE.match(path.split("?")[0])
        if method != "POST" or route is None:
            raise BedrockError(404, f"Not Found: {method} {path}", "UnknownOperationException")
        self._verify(method, path, headers, raw)
        try:
            body = json.loads(raw)
        except ValueError:
            raise BedrockError(400, "Malformed input request", "ValidationException") from None
        if not isinstance(body, dict) or body.get("anthropic_version") not in VERSIONS:
            raise BedrockError(400, f"anthropic_version: must be one of {', '.join(VERSIONS)}", "ValidationException")
        for key in ("model", "stream"):
            if key in body:
                raise BedrockError(400, f"Malformed input request: extraneous key [{key}] is not permitted",
                                   "ValidationException")
        inner = {k: v for k, v in body.items() if k != "anthropic_version"}
        return {**inner, "model": route["model"], **({"stream": True} if route["streamed"] else {})}

    def _verify(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> None:
        """SigV4 as Bedrock checks it: a known key, this region and service, a fresh date, the body's hash
        and the signature botocore computes over the signed headers with our secret."""
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials

        found = AUTHORIZATION.match(headers.get("authorization", ""))
        if found is None:
            raise BedrockError(403, "Missing Authentication Token", "MissingAuthenticationTokenException")
        if found["key"] != self.access_key:
            raise BedrockError(403, "The security token included in the request is invalid.",
                               "UnrecognizedClientException")
        if (found["region"], found["service"]) != (self.region, "bedrock"):
            raise BedrockError(403, f"Credential should be scoped to a valid region and service bedrock, not "
                               f"{found['region']}/{found['service']}", "InvalidSignatureException")
        stamp = headers.get("x-amz-date", "")
        try:
            at = datetime.datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.timezone.utc)
        except ValueError:
            raise BedrockError(403, "X-Amz-Date is missing or malformed", "InvalidSignatureException") from None
        if abs((datetime.datetime.now(datetime.timezone.utc) - at).total_seconds()) > 300:
            raise BedrockError(403, "Signature expired", "InvalidSignatureException")
        claimed = headers.get("x-amz-content-sha256")
        if claimed is not None and claimed != hashlib.sha256(raw).hexdigest():
            raise BedrockError(400, "The provided 'x-amz-content-sha256' header does not match what was "
                               "computed.", "ValidationException")
        signed = {name: headers.get(name, "") for name in found["signed"].split(";")}
        request = AWSRequest(method=method, url=f"http://{headers.get('host', '')}{path}", headers=signed, data=raw)
        request.context["timestamp"] = stamp
        signer = SigV4Auth(Credentials(self.access_key, self.secret_key), "bedrock", self.region)
        expected = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
        if not hmac.compare_digest(expected, found["signature"]):
            raise BedrockError(403, BAD_SIGNATURE, "InvalidSignatureException")


class EventStreamed(Streamed):
    """A streamed answer as InvokeModelWithResponseStream sends it: each Messages streaming event a `chunk` event
    whose JSON payload carries the event's JSON as base64 `bytes`; an `error` event an `exception` message."""

    content_type: ClassVar[str] = "application/vnd.amazon.eventstream"

    def chunks(self) -> list[bytes]:
        return [_message(name, data) for name, data in self.events]


def _message(name: str, data: dict[str, Any]) -> bytes:
    if name == "error":
        kind = STREAM_EXCEPTIONS.get(data["error"]["type"], "modelStreamErrorException")
        return frame({":exception-type": kind, ":content-type": "application/json", ":message-type": "exception"},
                     json.dumps({"message": data["error"]["message"]}).encode())
    chunk = {"bytes": base64.b64encode(json.dumps(data).encode()).decode()}
    return frame({":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"},
                 json.dumps(chunk).encode())


def frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One message of the AWS event stream encoding: a prelude (total length, headers length, the prelude's
    CRC32), string headers (name length, name, type 7, value length, value), the payload, and the CRC32 of all
    before it; integers big-endian."""
    encoded = b"".join(bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(value.encode()))
                       + value.encode() for name, value in headers.items())
    prelude = struct.pack(">II", 12 + len(encoded) + len(payload) + 4, len(encoded))
    message = prelude + struct.pack(">I", binascii.crc32(prelude)) + encoded + payload
    return message + struct.pack(">I", binascii.crc32(message))


@pytest.fixture
def fake_bedrock(fake_anthropic: FakeAnthropic) -> Iterator[FakeBedrock]:
    """A started fake Bedrock runtime in front of `fake_anthropic`; stopped after the test."""
    fake = FakeBedrock(fake_anthropic).start()
    yield fake
    fake.stop()
