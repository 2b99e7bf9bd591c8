"""What to do with one delivery, sans I/O: headers and raw body in, a `Verdict` out.

The Flask view only hands `request.get_data()` and the headers in, stores the
job when the verdict has one, and answers with the verdict's status.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.config import Settings
from bot.server.signature import InvalidSignature, validate
from bot.triggers import Ignore, Trigger, decide


@dataclass(frozen=True)
class Verdict:
    status: int
    outcome: str  # queued | ignored | pong | bad_signature | malformed
    message: str
    job: tuple[str, dict[str, Any]] | None = None  # (serialization key, payload) to store before answering


def triage(headers: Mapping[str, str], body: bytes, settings: Settings) -> Verdict:
    """Check the signature, then parse and apply the trigger rules."""
    secret = settings.github_webhook_secret or ""
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
    decision = decide(event, payload, settings)
    if isinstance(decision, Ignore):
        return Verdict(200, "ignored", decision.reason)
    return Verdict(202, "queued", "queued", (job_key(decision), job_payload(decision, event, delivery)))


def body_digest(body: bytes) -> str:
    """What identifies a delivery's content: the SHA-256 of the raw signed body.

    The event header is left out on purpose: it is not signed, so a replay could
    change it freely; two genuine deliveries never share a body.
    """
    return hashlib.sha256(body).hexdigest()


def job_key(trigger: Trigger) -> str:
    """Jobs with the same key never run at the same time: one issue or PR, one agent."""
    return f"{trigger.repo.lower()}#{trigger.number if trigger.number is not None else 'run'}"


def job_payload(trigger: Trigger, event: str, delivery: str) -> dict[str, Any]:
    return {"trigger": dataclasses.asdict(trigger), "event": event, "delivery": delivery}


def trigger_of(payload: Mapping[str, Any]) -> Trigger:
    """The `Trigger` stored by `job_payload`."""
    return Trigger(**payload["trigger"])
