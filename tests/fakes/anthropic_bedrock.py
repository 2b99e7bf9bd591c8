"""A fake of Amazon Bedrock's runtime on 127.0.0.1, serving Anthropic models through a `FakeAnthropic`.

`InvokeModel` as https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_InvokeModel.html and
https://docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-anthropic-claude-messages.html
describe it: `POST /model/{modelId}/invoke` with the Messages body, `anthropic_version` in the body
(`bedrock-2023-05-31`, or the SDK's newer one) and no `model` (the path names it). Every request must be signed with AWS
Signature Version 4 for the service `bedrock` in the fake's region: the fake recomputes the signature with
botocore's own `SigV4Auth` from the test's secret key and answers 403 `InvalidSignatureException` when it
does not match, as Bedrock does. The Messages logic (validation, scripted turns, token accounting) is the
wrapped `FakeAnthropic`'s; its errors come back in Bedrock's shape (`{"message": ...}` and
`x-amzn-ErrorType`). Bedrock has no token counting in the SDK and no Models API: other routes are 404.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from anthropic._constants import ANTHROPIC_API_VERSION

from tests.fakes.anthropic_api import FakeAnthropic, Received
from tests.fakes.anthropic_api import _Handler as JsonHandler  # answers with `server.fake.handle(...)`
from tests.fakes.http import Served

# The documented version, and the one this SDK sends (anthropic._constants.ANTHROPIC_API_VERSION).
VERSIONS = ("bedrock-2023-05-31", ANTHROPIC_API_VERSION)
INVOKE = re.compile(r"^/model/(?P<model>[^/]+)/invoke$")
AUTHORIZATION = re.compile(r"^AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/"
                           r"(?P<service>[^/]+)/aws4_request, SignedHeaders=(?P<signed>[^,]+), "
                           r"Signature=(?P<signature>[0-9a-f]{64})$")
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
class FakeBedrock(Served):
    """Start it, script `messages` (the wrapped fake), point the SDK at `url` with `env()`."""

    messages: FakeAnthropic
    access_key: str = "AKIAFAKEDECODE0000001"
    secret_key: str = "fake/secret/key/for+decode+bedrock+tests0"
    region: str = "us-east-1"
    requests: list[Received] = field(default_factory=list)  # every request, signed or not
    _lock: threading.Lock = field(default_factory=threading.Lock)
    handler = JsonHandler

    def env(self) -> dict[str, str]:
        """The variables a user sets for this endpoint (the SDK's and AWS's own names)."""
        return {"DECODE_PROVIDER": "bedrock", "AWS_REGION": self.region, "AWS_ACCESS_KEY_ID": self.access_key,
                "AWS_SECRET_ACCESS_KEY": self.secret_key, "ANTHROPIC_BEDROCK_BASE_URL": self.url,
                "AWS_EC2_METADATA_DISABLED": "true"}

    def handle(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, dict, Any] | None:
        """Answer one request: (status, headers, JSON body), or None to drop the connection."""
        with self._lock:
            self.requests.append(Received(method, path, headers, raw))
        try:
            route = INVOKE.match(path.split("?")[0])
            if method != "POST" or route is None:
                raise BedrockError(404, f"Not Found: {method} {path}", "UnknownOperationException")
            self._verify(method, path, headers, raw)
            body = json.loads(raw)
            if not isinstance(body, dict) or body.get("anthropic_version") not in VERSIONS:
                raise BedrockError(400, f"anthropic_version: must be one of {', '.join(VERSIONS)}",
                                   "ValidationException")
            if "model" in body:
                raise BedrockError(400, "Malformed input request: extraneous key [model] is not permitted",
                                   "ValidationException")
        except BedrockError as e:
            return e.status, {"x-amzn-ErrorType": f"{e.error_type}:http://internal.amazon.com/coral/"}, \
                {"message": e.message}
        except ValueError:
            return 400, {"x-amzn-ErrorType": "ValidationException"}, {"message": "Malformed input request"}
        inner = {k: v for k, v in body.items() if k != "anthropic_version"}
        inner["model"] = route["model"]
        answer = self.messages.handle("POST", "/v1/messages", {
            "x-api-key": self.messages.api_key, "anthropic-version": "2023-06-01",
            "content-type": "application/json"}, json.dumps(inner).encode())
        if answer is None:
            return None
        status, extra, payload = answer
        request_id = extra.pop("request-id", "")
        extra["x-amzn-RequestId"] = request_id
        if status != 200:
            extra["x-amzn-ErrorType"] = ERROR_TYPES.get(status, "InternalServerException")
            return status, extra, {"message": payload["error"]["message"]}
        return status, extra, payload

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


@pytest.fixture
def fake_bedrock(fake_anthropic: FakeAnthropic) -> Iterator[FakeBedrock]:
    """A started fake Bedrock runtime in front of `fake_anthropic`; stopped after the test."""
    fake = FakeBedrock(fake_anthropic).start()
    yield fake
    fake.stop()
