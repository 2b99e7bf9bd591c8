"""A fake of Vertex AI's Anthropic endpoints and Google's OAuth token endpoint on 127.0.0.1.

As https://cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude/use-claude describes:
`POST /v1/projects/{project}/locations/{region}/publishers/anthropic/models/{model}:rawPredict` takes the
Messages body with `anthropic_version` (`vertex-2023-10-16`, or the SDK's newer one) and without `model`;
`...:streamRawPredict` takes the same body with `"stream": true` and answers with the wrapped fake's Server-Sent
Events (an overload mid-stream an `error` event, as Anthropic's own API sends it);
`.../models/count-tokens:rawPredict` counts tokens. Each wants `Authorization: Bearer <access token>`, a
token this fake issued at `POST /token` (https://developers.google.com/identity/protocols/oauth2/service-account:
the JWT-bearer grant, its assertion signed RS256 by the service account's key for Google's token audience,
`scope` cloud-platform). `key_file()` writes a service account key whose `token_uri` is that endpoint, so
google-auth obtains the token exactly as it would from Google. Google's own errors are
`{"error": {"code", "message", "status"}}`; the Messages logic and its errors are the wrapped `FakeAnthropic`'s.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import jwt
import pytest
from anthropic._constants import ANTHROPIC_API_VERSION
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.fakes.anthropic_api import FakeAnthropic, Received
from tests.fakes.anthropic_gateway import Gateway

VERSIONS = ("vertex-2023-10-16", ANTHROPIC_API_VERSION)
PREDICT = re.compile(r"^/v1/projects/(?P<project>[^/]+)/locations/(?P<region>[^/]+)/publishers/anthropic/"
                     r"models/(?P<model>[^/:]+):(?P<method>rawPredict|streamRawPredict)$")
GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
AUDIENCE = "https://oauth2.googleapis.com/token"  # what google-auth signs, wherever token_uri points
SCOPE = "https://www.googleapis.com/auth/cloud-platform"
STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND"}


class GoogleError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


@dataclass
class FakeVertex(Gateway):
    """Start it, script `messages` (the wrapped fake), write `key_file()`, point the SDK at `url` with `env()`;
    `requests` holds the Vertex requests, `token_requests` the token endpoint's."""

    project: str = "decode-fake-project"
    region: str = "us-east5"
    client_email: str = "decode@decode-fake-project.iam.gserviceaccount.com"
    token_requests: list[Received] = field(default_factory=list)
    _tokens: set[str] = field(default_factory=set)
    _key: Any = field(default_factory=lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048))

    def key_file(self, path: Path, *, project: str | None = None) -> Path:
        """A service account key file (as the console downloads it) for this fake's token endpoint."""
        pem = self._key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()).decode()
        path.write_text(json.dumps({
            "type": "service_account", "project_id": self.project if project is None else project,
            "private_key_id": "k1", "private_key": pem, "client_email": self.client_email, "client_id": "1",
            "token_uri": f"{self.url}/token", "universe_domain": "googleapis.com"}))
        return path

    def env(self, key_file: Path) -> dict[str, str]:
        """The variables a user sets for this endpoint (the SDK's and Google's own names)."""
        return {"DECODE_PROVIDER": "vertex", "CLOUD_ML_REGION": self.region, "ANTHROPIC_VERTEX_BASE_URL":
                f"{self.url}/v1", "GOOGLE_APPLICATION_CREDENTIALS": str(key_file)}

    def handle(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, dict, Any] | None:
        """Answer one request: (status, headers, JSON body), or None to drop the connection."""
        if path == "/token":
            self.record(method, path, headers, raw, into=self.token_requests)
            return self._token(raw)
        self.record(method, path, headers, raw)
        try:
            inner_path, body = self._route(method, path, headers, raw)
        except GoogleError as e:
            error = {"code": e.status, "message": e.message, "status": STATUS.get(e.status, "INTERNAL")}
            return e.status, {}, {"error": error}
        return self.forward(inner_path, body)

    def _route(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> tuple[str, dict]:
        """The wrapped Messages API's path and body for a checked Vertex request."""
        route = PREDICT.match(path.split("?")[0])
        if method != "POST" or route is None:
            raise GoogleError(404, f"The requested URL {path} was not found on this server.")
        token = headers.get("authorization", "").removeprefix("Bearer ")
        if token not in self._tokens:
            raise GoogleError(401, "Request had invalid authentication credentials. Expected OAuth 2 access "
                              "token, login cookie or other valid authentication credential.")
        if (route["project"], route["region"]) != (self.project, self.region):
            raise GoogleError(403, f"Permission 'aiplatform.endpoints.predict' denied on resource "
                              f"'projects/{route['project']}/locations/{route['region']}' (or it may not exist).")
        try:
            body = json.loads(raw)
        except ValueError:
            raise GoogleError(400, "Invalid JSON payload received.") from None
        if not isinstance(body, dict) or body.get("anthropic_version") not in VERSIONS:
            raise GoogleError(400, f"anthropic_version: must be one of {', '.join(VERSIONS)}")
        inner = {k: v for k, v in body.items() if k != "anthropic_version"}
        if route["model"] == "count-tokens" and route["method"] == "rawPredict":
            return "/v1/messages/count_tokens", inner
        if "model" in body:
            raise GoogleError(400, "model: the model is named by the URL, not the body")
        if (route["method"] == "streamRawPredict") != (body.get("stream") is True):
            raise GoogleError(400, f"stream: {route['method']} wants a body with \"stream\": "
                                   f"{'true' if route['method'] == 'streamRawPredict' else 'false or none'}")
        return "/v1/messages", {**inner, "model": route["model"]}

    def _token(self, raw: bytes) -> tuple[int, dict, Any]:
        """Google's token endpoint for a service account's JWT-bearer grant."""
        form = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
        if form.get("grant_type") != GRANT:
            return 400, {}, {"error": "unsupported_grant_type", "error_description": "Invalid grant_type"}
        try:
            claims = jwt.decode(form.get("assertion", ""), self._key.public_key(), algorithms=["RS256"],
                                audience=AUDIENCE)
        except jwt.PyJWTError as e:
            return 400, {}, {"error": "invalid_grant", "error_description": f"Invalid JWT Signature: {e}"}
        if claims.get("iss") != self.client_email or SCOPE not in claims.get("scope", "").split():
            return 400, {}, {"error": "invalid_scope", "error_description": "Invalid issuer or scope"}
        token = "ya29.fake-" + secrets.token_urlsafe(24)
        with self._lock:
            self._tokens.add(token)
        return 200, {}, {"access_token": token, "expires_in": 3599, "token_type": "Bearer"}


@pytest.fixture
def fake_vertex(fake_anthropic: FakeAnthropic) -> Iterator[FakeVertex]:
    """A started fake Vertex AI (and token endpoint) in front of `fake_anthropic`; stopped after the test."""
    fake = FakeVertex(fake_anthropic).start()
    yield fake
    fake.stop()
