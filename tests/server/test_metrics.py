"""/metrics is not public: a bearer token (DECODE_METRICS_TOKEN) or a loopback peer, in `decode serve`'s app
and in the scrape endpoint of `decode worker --port` alike."""

from __future__ import annotations

import io

import pytest

from bot.server.metrics import Metrics, guarded_app, metrics_refusal
from bot.jobs.sqlite import Store
from tests.support.runs import web_app


@pytest.mark.parametrize("token,authorization,addr,proxied,status", [
    (None, "", "127.0.0.1", False, None),
    (None, "", "::1", False, None),
    (None, "", "10.0.0.5", False, 403),
    (None, "", "127.0.0.1", True, 403),  # a reverse proxy on this host forwarding someone else
    ("s3cret-token", "", "127.0.0.1", False, 401),
    ("s3cret-token", "Bearer wrong", "127.0.0.1", False, 401),
    ("s3cret-token", "Basic s3cret-token", "10.0.0.5", False, 401),
    ("s3cret-token", "Bearer s3cret-token", "10.0.0.5", False, None),
    ("s3cret-token", "bearer s3cret-token", "10.0.0.5", True, None),
])
def test_metrics_answers_the_bearer_token_or_a_private_bind(token, authorization, addr, proxied, status):
    refusal = metrics_refusal(token, authorization, addr, proxied)
    assert (refusal[0] if refusal else None) == status
    if refusal:
        assert "s3cret" not in refusal[1]


def test_metrics_over_http(tmp_path):
    store = Store(tmp_path / "jobs.sqlite3")
    client = web_app(tmp_path, store).test_client()
    assert client.get("/metrics").status_code == 200  # the test client is 127.0.0.1
    assert client.get("/metrics", environ_base={"REMOTE_ADDR": "192.0.2.7"}).status_code == 403
    guarded = web_app(tmp_path, store, metrics_token="tok-123").test_client()
    refused = guarded.get("/metrics")
    assert refused.status_code == 401 and refused.headers["WWW-Authenticate"].startswith("Bearer")
    answered = guarded.get("/metrics", headers={"Authorization": "Bearer tok-123"},
                           environ_base={"REMOTE_ADDR": "192.0.2.7"})
    assert answered.status_code == 200 and b"decode_jobs" in answered.data
    store.close()


def scrape(app, addr: str, authorization: str = "") -> tuple[str, bytes]:
    """One GET through the WSGI app, as a server would call it."""
    seen: list[str] = []
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics", "QUERY_STRING": "", "REMOTE_ADDR": addr,
               "wsgi.input": io.BytesIO(), "SERVER_NAME": "w", "SERVER_PORT": "9", "wsgi.url_scheme": "http"}
    if authorization:
        environ["HTTP_AUTHORIZATION"] = authorization
    body = b"".join(app(environ, lambda status, headers: seen.append(status)))
    return seen[0], body


def test_the_workers_scrape_endpoint_follows_the_same_rule():
    metrics = Metrics(lambda: {"queued": 2})
    open_app = guarded_app(metrics.registry, None)
    assert scrape(open_app, "127.0.0.1")[0].startswith("200") and b"decode_jobs" in scrape(open_app, "::1")[1]
    assert scrape(open_app, "192.0.2.7")[0].startswith("403")
    locked = guarded_app(metrics.registry, "tok-123")
    assert scrape(locked, "127.0.0.1")[0].startswith("401")
    status, body = scrape(locked, "192.0.2.7", "Bearer tok-123")
    assert status.startswith("200") and b'decode_jobs{state="queued"} 2.0' in body
