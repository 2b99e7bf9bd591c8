"""The App webhook's failed deliveries, asked for again: which ones (none a server took, none it refused),
read page by page from the fake GitHub, which makes them again to a real HTTP receiver."""

from __future__ import annotations

import json
import time
import uuid
from http.server import BaseHTTPRequestHandler

from bot.github.auth import AppCredentials
from bot.github.redeliver import Attempt, Redelivery, to_redeliver
from tests.fakes.http import start_server, stop_server
from tests.support.server import free_port


class Receiver(BaseHTTPRequestHandler):
    """A webhook server that answers each delivery guid as `answers` says (202 when it says nothing)."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(self.server.fake.get(self.headers["X-GitHub-Delivery"], 202))  # type: ignore[attr-defined]
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def sent(fake, event: str = "issues", guid: str | None = None) -> str:
    guid = guid or str(uuid.uuid4())
    body = json.dumps({"action": "labeled", "n": guid}).encode()
    fake.hooks.send(body, {"Content-Type": "application/json", "X-GitHub-Event": event, "X-GitHub-Delivery": guid})
    return guid


def made_again(fake, count: int) -> None:
    deadline = time.monotonic() + 10
    while sum(d.redelivery for d in fake.hooks.deliveries) < count:
        assert time.monotonic() < deadline, "GitHub never made the deliveries again"
        time.sleep(0.05)


def test_a_delivery_is_made_again_only_when_no_server_took_it_and_one_may():
    def at(n: int, guid: str, code: int) -> Attempt:
        return Attempt(n, guid, code, 1000.0 + n, "issues")

    attempts = [at(1, "down", 0), at(2, "busy", 503), at(3, "refused", 401), at(4, "late", 502),
                at(5, "late", 202), at(6, "taken", 202), at(7, "refused-then-down", 0), at(8, "refused-then-down", 400),
                at(9, "down", 0)]
    assert [(a.id, a.guid) for a in to_redeliver(attempts)] == [(2, "busy"), (9, "down")]


def test_the_failed_deliveries_of_every_page_are_made_again_once_then_nothing(fake_github):
    answers: dict[str, int] = {}
    receiver = start_server(Receiver, answers)
    try:
        fake_github.hooks.url = f"http://127.0.0.1:{free_port()}/webhook"  # nothing listens: the server is down
        down = sent(fake_github)
        fake_github.hooks.url = f"http://127.0.0.1:{receiver.server_port}/webhook"
        for _ in range(120):  # a page and more of deliveries that were taken: the failed one is on page 2
            sent(fake_github, "ping")
        answers["busy"] = 503
        sent(fake_github, guid="busy")
        answers["refused"] = 401
        sent(fake_github, guid="refused")
        answers.clear()  # the server takes everything from now on
        credentials = AppCredentials(str(fake_github.app_id), fake_github.private_key_pem, fake_github.api_url)
        redelivery = Redelivery(credentials, look_back_s=3600)
        assert sorted(a.guid for a in redelivery.sweep()) == sorted([down, "busy"])
        made_again(fake_github, 2)
        again = {d.guid: d.status_code for d in fake_github.hooks.deliveries if d.redelivery}
        assert again == {down: 202, "busy": 202}  # the same guids, taken this time
        assert redelivery.sweep() == []  # taken: not asked for again
        pages = fake_github.calls("GET", r"^/app/hook/deliveries$")
        assert len(pages) >= 3 and any("cursor" in r.query for r in pages)
    finally:
        stop_server(receiver)


def test_a_delivery_github_will_not_make_again_is_passed_over_and_one_that_keeps_failing_is_asked_six_times(
        fake_github, caplog):
    answers = {"old": 502, "stuck": 503}
    receiver = start_server(Receiver, answers)
    try:
        fake_github.hooks.url = f"http://127.0.0.1:{receiver.server_port}/webhook"
        sent(fake_github, guid="old")
        sent(fake_github, guid="stuck")
        [old] = [d for d in fake_github.hooks.deliveries if d.guid == "old"]
        fake_github.inject("POST", rf"^/app/hook/deliveries/{old.id}/attempts$", 422,
                           body={"message": "Cannot redeliver a delivery older than 3 days"})
        credentials = AppCredentials(str(fake_github.app_id), fake_github.private_key_pem, fake_github.api_url)
        redelivery = Redelivery(credentials, look_back_s=3600)
        assert [a.guid for a in redelivery.sweep()] == ["old", "stuck"]  # the refusal did not stop the next ask
        assert "would not make the issues delivery old again" in caplog.text
        made_again(fake_github, 1)  # "stuck" only
        answers.pop("old")  # the server takes "old" once it is made again
        assert [a.guid for a in redelivery.sweep()] == ["old", "stuck"]
        made_again(fake_github, 3)
        for asks in range(3, 7):
            assert [a.guid for a in redelivery.sweep()] == ["stuck"]  # "old" was taken
            made_again(fake_github, asks + 1)
        assert redelivery.sweep() == []  # six asks: a server that keeps failing "stuck" is not fed it for ever
    finally:
        stop_server(receiver)


def test_a_look_that_fails_is_logged_and_the_next_one_asks(fake_github, caplog):
    receiver = start_server(Receiver, {})
    redelivery = None
    try:
        fake_github.hooks.url = f"http://127.0.0.1:{free_port()}/webhook"
        sent(fake_github)
        fake_github.hooks.url = f"http://127.0.0.1:{receiver.server_port}/webhook"
        fake_github.inject("GET", r"^/app/hook/deliveries$", 404)  # the first look fails (404: not retried)
        credentials = AppCredentials(str(fake_github.app_id), fake_github.private_key_pem, fake_github.api_url)
        redelivery = Redelivery(credentials, every_s=0.1, look_back_s=3600)
        redelivery.start()
        made_again(fake_github, 1)
        assert "could not ask GitHub for failed webhook deliveries" in caplog.text
    finally:
        if redelivery is not None and redelivery.thread is not None:
            redelivery.stop()
            redelivery.thread.join(10)  # its look under way ends before the fake GitHub does
        stop_server(receiver)
