"""The fake GitHub's App webhook: the deliveries it makes to `Hooks.url`, their list and their redelivery,
shaped like https://docs.github.com/en/rest/apps/webhooks.

A delivery that finds nothing listening is recorded as GitHub records one: status code 0, "failed to
connect"; a redelivery is made again with the same body and headers (the same `X-GitHub-Delivery` guid), after
the 202, as GitHub makes it.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tests.fakes.github_rest import Result, need_app, not_found, now_iso, route

if TYPE_CHECKING:
    from tests.fakes.github import FakeGitHub, Request

TIMEOUT_S = 10.0  # GitHub gives a receiver 10 s to answer


@dataclass(frozen=True)
class Delivery:
    """One attempt, as GitHub lists it."""

    id: int
    guid: str
    event: str
    action: str | None
    status_code: int
    status: str
    delivered_at: float
    duration: float
    redelivery: bool
    body: bytes
    headers: dict[str, str]

    def render(self, fake: FakeGitHub) -> dict:
        return {"id": self.id, "guid": self.guid, "delivered_at": now_iso(self.delivered_at),
                "redelivery": self.redelivery, "duration": self.duration, "status": self.status,
                "status_code": self.status_code, "event": self.event, "action": self.action,
                "installation_id": fake.installation_id, "repository_id": None, "throttled_at": None}


class Hooks:
    """The App's webhook: where it delivers (`url`) and every attempt, oldest first."""

    def __init__(self) -> None:
        self.url: str | None = None
        self.deliveries: list[Delivery] = []
        self._ids = itertools.count(90_000_001)
        self._lock = threading.Lock()

    def send(self, body: bytes, headers: dict[str, str], *, redelivery: bool = False) -> Delivery:
        """POST `body` with `headers` to `url` now, and record the attempt."""
        assert self.url is not None, "set the fake's hooks.url first"
        started = time.time()
        try:
            with urllib.request.urlopen(urllib.request.Request(self.url, data=body, headers=headers, method="POST"),
                                        timeout=TIMEOUT_S) as answer:
                code, status = answer.status, "OK"
        except urllib.error.HTTPError as e:
            code, status = e.code, f"Invalid HTTP Response: {e.code}"
        except TimeoutError:
            code, status = 0, "timed out"
        except (urllib.error.URLError, ConnectionError):
            code, status = 0, "failed to connect"
        action = json.loads(body).get("action") if body.startswith(b"{") else None
        made = Delivery(next(self._ids), headers["X-GitHub-Delivery"], headers["X-GitHub-Event"], action, code, status,
                        started, round(time.time() - started, 3), redelivery, body, dict(headers))
        with self._lock:
            self.deliveries.append(made)
        return made

    def newest_first(self) -> list[Delivery]:
        with self._lock:
            return self.deliveries[::-1]


@route("GET", "/app/hook/deliveries")
def list_deliveries(fake: FakeGitHub, request: Request, identity) -> Result:
    """Newest first, `per_page` at a time from the delivery `cursor` names; the next page's cursor in `link`."""
    need_app(identity)
    items = fake.hooks.newest_first()
    per_page = min(int(request.query.get("per_page", 30)), 100)
    start = 0
    if "cursor" in request.query:
        start = next((i for i, d in enumerate(items) if str(d.id) == request.query["cursor"]), len(items))
    page, rest = items[start:start + per_page], items[start + per_page:]
    headers = {"link": f'<{fake.api_url}{request.path}?per_page={per_page}&cursor={rest[0].id}>; rel="next"'} \
        if rest else {}
    return 200, [d.render(fake) for d in page], headers


@route("POST", r"/app/hook/deliveries/(?P<delivery_id>\d+)/attempts")
def redeliver(fake: FakeGitHub, request: Request, identity, delivery_id) -> Result:
    need_app(identity)
    found = next((d for d in fake.hooks.newest_first() if d.id == int(delivery_id)), None)
    if found is None:
        raise not_found()
    threading.Thread(target=fake.hooks.send, args=(found.body, found.headers), kwargs={"redelivery": True},
                     daemon=True).start()
    return 202, {}, {}
