"""What to do with one delivery, sans I/O: headers and raw body in, a `Verdict` out.

The Flask view only hands `request.get_data()` and the headers in, stores the
job when the verdict has one, and answers with the verdict's status.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.server.signature import InvalidSignature, validate
from bot.github.triggers import Ignore, Router
from bot.github.work import job_key, job_payload


@dataclass(frozen=True)
class Verdict:
    status: int
    outcome: str  # queued | ignored | pong | bad_signature | malformed
    message: str
    job: tuple[str, dict[str, Any]] | None = None  # (serialization key, payload) to store before answering


def triage(headers: Mapping[str, str], body: bytes, secret: str, router: Router) -> Verdict:
    """Check the signature against `secret`, then parse and apply `router`'s trigger rules."""
    try:
        validate(body, signature=headers.get("X-Hub-Signature-256"), secret=secret)
    except InvalidSignature as e:
        return Verdict(401, "bad_signature", str(e))
    event = headers.get("X-GitHub-Event")
    delivery = headers.get("X-GitHub-Delivery")
    if not event or not delivery:
        return Verdict(400, "malformed", "X-GitHub-Event and X-GitHub-Delivery headers are required")
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return Verdict(400, "malformed", "the body is not JSON")
    except RecursionError:
        return Verdict(400, "malformed", "the body nests JSON arrays or objects too deeply to parse")
    if not isinstance(payload, dict):
        return Verdict(400, "malformed", "the body is not a JSON object")
    if event == "ping":
        return Verdict(200, "pong", "pong")
    decision = router.decide(event, payload)
    if isinstance(decision, Ignore):
        return Verdict(200, "ignored", decision.reason)
    return Verdict(202, "queued", "queued", (job_key(decision), job_payload(decision, event, delivery)))


def body_digest(body: bytes) -> str:
    """What identifies a delivery's content: the SHA-256 of the raw signed body.

    The event header is left out on purpose: it is not signed, so a replay could
    change it freely; two genuine deliveries never share a body.
    """
    return hashlib.sha256(body).hexdigest()
