"""Webhook signatures, sans I/O: bytes and headers in, a verdict out.

GitHub signs the raw body with HMAC-SHA256 under the webhook secret and sends
`X-Hub-Signature-256: sha256=<hex>`; it must be checked on the raw bytes before
anything is parsed, in constant time
(https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries).
"""

from __future__ import annotations

import hashlib
import hmac

from bot.core.errors import DecodeError


class InvalidSignature(DecodeError):
    """The delivery is not signed with our secret; the message says what to check."""


def sign(body: bytes, secret: str) -> str:
    """The `X-Hub-Signature-256` value GitHub sends for `body`."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def validate(body: bytes, *, signature: str | None, secret: str) -> None:
    """Raise `InvalidSignature` unless `signature` is GitHub's signature of `body` under `secret`."""
    if not signature:
        raise InvalidSignature("the delivery has no X-Hub-Signature-256 header: set a webhook secret on the GitHub App")
    if not hmac.compare_digest(signature.encode(), sign(body, secret).encode()):
        raise InvalidSignature("the webhook signature does not match: check GITHUB_WEBHOOK_SECRET")
