"""Deliveries GitHub could not make, asked for again: while `decode serve` was down, or answered 5xx (its
store unreachable), GitHub's deliveries to it failed, and GitHub does not make a failed delivery again by
itself (https://docs.github.com/en/webhooks/using-webhooks/handling-failed-webhook-deliveries).

`decode serve`, as a GitHub App, reads the App webhook's deliveries (`GET /app/hook/deliveries`, newest first)
at start back to `LOOK_BACK_S` ago, then every `EVERY_S` back to its previous look (less `MARGIN_S`). A
delivery (its guid) none of whose attempts was answered 2xx or 3xx, and whose newest attempt got no answer or
a 5xx, is made again (`POST /app/hook/deliveries/{id}/attempts`). A 4xx is the server's refusal (a bad
signature, a body it cannot read): made again, it would be refused again. A delivery is asked for at most
`MAX_ASKS` times by one process (half an hour of looks: a server that keeps failing one is not fed it for
ever), and one GitHub will not make again (older than its 3 days) is logged and passed over. A redelivery keeps
its guid, so the store takes it once however many servers ask for it, and one taken after all is a duplicate.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from github import GithubException

from bot.github.auth import AppCredentials

log = logging.getLogger(__name__)

LOOK_BACK_S = 24 * 3600.0  # at start: a day of deliveries (GitHub makes them again for 3 days)
EVERY_S = 300.0
MARGIN_S = 60.0  # an attempt GitHub lists a little after it was made is still seen
MAX_ASKS = 6
_NEXT = re.compile(r"[?&]cursor=([^&>]+)[^>]*>;\s*rel=\"next\"")


@dataclass(frozen=True)
class Attempt:
    """One delivery attempt as GitHub lists it: its id, the delivery's guid, the answer's status code (0: no
    answer), when it was made (epoch seconds) and its event."""

    id: int
    guid: str
    status_code: int
    delivered_at: float
    event: str

    @classmethod
    def of(cls, item: dict) -> Attempt:
        at = datetime.fromisoformat(str(item["delivered_at"]).replace("Z", "+00:00")).timestamp()
        return cls(int(item["id"]), str(item["guid"]), int(item.get("status_code") or 0), at, str(item["event"]))


def to_redeliver(attempts: Iterable[Attempt]) -> list[Attempt]:
    """The newest attempt of each delivery that no server took (2xx, 3xx) and that may be taken if made again
    (its newest attempt got no answer, or a 5xx), oldest delivery first."""
    newest: dict[str, Attempt] = {}
    taken: set[str] = set()
    for attempt in attempts:
        if 200 <= attempt.status_code < 400:
            taken.add(attempt.guid)
        if attempt.guid not in newest or (attempt.delivered_at, attempt.id) > (newest[attempt.guid].delivered_at,
                                                                               newest[attempt.guid].id):
            newest[attempt.guid] = attempt
    due = [a for guid, a in newest.items() if guid not in taken and (a.status_code == 0 or a.status_code >= 500)]
    return sorted(due, key=lambda a: (a.delivered_at, a.id))


class Redelivery:
    """Asks GitHub again for the App webhook's failed deliveries, at `start` and every `every_s` after."""

    def __init__(self, credentials: AppCredentials, *, every_s: float = EVERY_S,
                 look_back_s: float = LOOK_BACK_S) -> None:
        self.credentials = credentials
        self.every_s = every_s
        self.since = time.time() - look_back_s
        self._asked: dict[str, int] = {}  # guid -> how many times this process asked for it
        self._stop = threading.Event()
        self.thread: threading.Thread | None = None

    def sweep(self) -> list[Attempt]:
        """Read the deliveries since the previous look, ask GitHub to make the failed ones again; those asked."""
        started = time.time()
        due = [a for a in to_redeliver(self._attempts(self.since)) if self._asked.get(a.guid, 0) < MAX_ASKS]
        for attempt in due:
            self._asked[attempt.guid] = self._asked.get(attempt.guid, 0) + 1
            try:
                self.credentials.as_app("POST", f"/app/hook/deliveries/{attempt.id}/attempts")
            except GithubException as e:  # too old to make again, say: the others are still asked for
                log.warning("GitHub would not make the %s delivery %s again: %s", attempt.event, attempt.guid, e)
        if due:
            log.warning("GitHub could not make %d webhook deliveries (%s); asked it to make them again", len(due),
                        ", ".join(sorted({a.event for a in due})))
        self.since = started - MARGIN_S
        return due

    def _attempts(self, since: float) -> Iterable[Attempt]:
        """The attempts made since `since`, newest first, a page of 100 at a time."""
        parameters: dict[str, str | int] = {"per_page": 100}
        while True:
            headers, items = self.credentials.as_app("GET", "/app/hook/deliveries", parameters)
            for item in items:
                attempt = Attempt.of(item)
                if attempt.delivered_at < since:
                    return
                yield attempt
            found = _NEXT.search(headers.get("link", ""))
            if found is None or not items:
                return
            parameters = {"per_page": 100, "cursor": found[1]}

    def start(self) -> None:
        """Sweep now and every `every_s` on a thread of its own; a sweep that fails is logged and tried again."""
        self.thread = threading.Thread(target=self._loop, name="redelivery", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """No look after the one under way (the server is stopping)."""
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.sweep()
            except Exception as e:  # noqa: BLE001 - GitHub unreachable, the App lacks access: the next look
                log.warning("could not ask GitHub for failed webhook deliveries: %s", e)
            self._stop.wait(self.every_s)
