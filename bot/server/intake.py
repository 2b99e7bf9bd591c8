"""What to do with one delivery, sans I/O: headers and raw body in, a `Verdict` out.

The Flask view only hands `request.get_data()` and the headers in, stores the
job when the verdict has one, and answers with the verdict's status.

A replay is caught twice: by the store's body digest, and here by the event's
time. A signed body never changes, so its timestamps are those of the day it was
sent; one that would start a job and whose newest time (`event_time`) is older
than the digests are kept (`STALE_AFTER_S`, a day short of `BODY_RETENTION_S`
for clock skew) is refused, since its digest may be pruned. GitHub sends no time
header (`X-GitHub-Delivery` is a random GUID:
https://docs.github.com/en/webhooks/webhook-events-and-payloads#delivery-headers),
so the time is the payload's. A job-making delivery with no time in it (a
workflow_dispatch, an installation) is judged by its digest alone.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Protocol

from bot.jobs.store import BODY_RETENTION_S
from bot.server.signature import InvalidSignature, validate
from bot.github.triggers import Ignore, Router
from bot.github.work import job_key, job_payload

STALE_AFTER_S = BODY_RETENTION_S - 86400
# The objects an event acts on, whose times GitHub sets when the event happens (a label added bumps the
# issue's updated_at, a review carries submitted_at); the repository's or installation's may be years old.
EVENT_OBJECTS = ("comment", "review", "issue", "pull_request", "check_suite")
TIME_FIELDS = ("updated_at", "submitted_at", "created_at")


@dataclass(frozen=True)
class Verdict:
    status: int
    outcome: str  # queued | ignored | pong | bad_signature | malformed | stale
    message: str
    job: tuple[str, dict[str, Any]] | None = None  # (serialization key, payload) to store before answering


class Headers(Protocol):
    """What `triage` reads of a delivery's headers: a value by name (Flask's request headers, or a dict)."""

    def get(self, key: str) -> str | None: ...


def triage(headers: Headers, body: bytes, secret: str, router: Router, *,
           now: float | None = None) -> Verdict:
    """Check the signature against `secret`, then parse and apply `router`'s trigger rules; a delivery that
    would start a job but is older than `STALE_AFTER_S` at `now` is refused as a replay."""
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
    when = event_time(payload)
    if when is not None and when < (time.time() if now is None else now) - STALE_AFTER_S:
        day = datetime.fromtimestamp(when, timezone.utc).date().isoformat()
        return Verdict(400, "stale", f"the event is from {day}, older than the {STALE_AFTER_S // 86400} days "
                                     "deliveries are remembered: refused as a replay")
    installation = payload.get("installation")
    number = installation.get("id") if isinstance(installation, dict) else None
    return Verdict(202, "queued", "queued", (job_key(decision), job_payload(
        decision, event, delivery, number if isinstance(number, int) and not isinstance(number, bool) else None)))


def body_digest(body: bytes) -> str:
    """What identifies a delivery's content: the SHA-256 of the raw signed body.

    The event header is left out on purpose: it is not signed, so a replay could
    change it freely; two genuine deliveries never share a body.
    """
    return hashlib.sha256(body).hexdigest()


def event_time(payload: Mapping[str, Any]) -> float | None:
    """The newest time (Unix seconds) among the timestamps of the objects the event acts on, None when it
    carries none. Every time in a body is at or before when GitHub signed it."""
    times = []
    for name in EVENT_OBJECTS:
        target = payload.get(name)
        if not isinstance(target, dict):
            continue
        for field in TIME_FIELDS:
            value = target.get(field)
            try:
                if isinstance(value, str):
                    times.append(datetime.fromisoformat(value).timestamp())
            except ValueError:
                continue
    return max(times, default=None)
