"""/metrics is not public: a bearer token (DECODE_METRICS_TOKEN) or a server bound to loopback, in `decode
serve`'s app and in the scrape endpoint of `decode worker --port` alike."""

from __future__ import annotations

import io
import urllib.error
import urllib.request

import pytest

from bot.server.context import app_context
from bot.server.metrics import Metrics, guarded_app, metrics_refusal
from bot.jobs.sqlite import Store
from tests.support.runs import web_app
from tests.support.server import Server, env  # noqa: F401 (fixture)


@pytest.mark.parametrize("token,bind,proxied,status", [
    (None, "127.0.0.1", False, None),
    (None, "::1", False, None),
    (None, "localhost", False, None),
    (None, "::ffff:127.0.0.1", False, None),
    (None, "0.0.0.0", False, 403),  # a proxy on this host connects from loopback, maybe without X-Forwarded-For
    (None, "10.0.0.5", False, 403),
    (None, None, False, 403),  # the bind is not known (the Modal app)
    (None, "127.0.0.1", True, 403),  # a reverse proxy on this host forwarding someone else
])
def test_without_a_token_metrics_answers_a_loopback_bind_only(token, bind, proxied, status):
    refusal = metrics_refusal(token, "", bind, proxied)
    assert (refusal[0] if refusal else None) == status


@pytest.mark.parametrize("token,authorization,bind,proxied,status", [
    ("s3cret-token", "", "127.0.0.1", False, 401),
    ("s3cret-token", "Bearer wrong", "127.0.0.1", False, 401),
    ("s3cret-token", "Basic s3cret-token", "0.0.0.0", False, 401),
    ("s3cret-token", "Bearer s3cret-token", "0.0.0.0", False, None),
    ("s3cret-token", "bearer s3cret-token", None, True, None),
])
def test_with_a_token_metrics_answers_the_token_only(token, authorization, bind, proxied, status):
    refusal = metrics_refusal(token, authorization, bind, proxied)
    assert (refusal[0] if refusal else None) == status
    if refusal:
        assert "s3cret" not in refusal[1]


def test_metrics_over_http(tmp_path):
    store = Store(tmp_path / "jobs.sqlite3")
    app = web_app(tmp_path, store)
    client = app.test_client()
    assert client.get("/metrics").status_code == 403  # the bind is not known: the token is needed
    app_context(app).bind = "127.0.0.1"
    answered = client.get("/metrics")
    assert answered.status_code == 200 and answered.headers["Content-Type"].count("charset") == 1
    assert client.get("/metrics", headers={"X-Forwarded-For": "192.0.2.7"}).status_code == 403
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
    open_app = guarded_app(metrics.registry, None, "127.0.0.1")
    assert scrape(open_app, "127.0.0.1")[0].startswith("200") and b"decode_jobs" in scrape(open_app, "::1")[1]
    assert scrape(guarded_app(metrics.registry, None, "0.0.0.0"), "127.0.0.1")[0].startswith("403")
    locked = guarded_app(metrics.registry, "tok-123", "0.0.0.0")
    assert scrape(locked, "127.0.0.1")[0].startswith("401")
    status, body = scrape(locked, "192.0.2.7", "Bearer tok-123")
    assert status.startswith("200") and b'decode_jobs{state="queued"} 2.0' in body


def get(url: str, token: str = "") -> tuple[int, str]:
    """The status and Content-Type of a GET."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.headers["Content-Type"]
    except urllib.error.HTTPError as e:
        return e.code, e.headers["Content-Type"]


def test_decode_serve_on_every_interface_wants_the_token_even_from_this_host(env, tmp_path):
    """Bound to 0.0.0.0, a request from 127.0.0.1 without X-Forwarded-For may be a reverse proxy's."""
    server = Server({**env, "DECODE_WORKERS": "0", "DECODE_METRICS_TOKEN": "tok-123"}, tmp_path / "serve.log",
                    host="0.0.0.0")
    try:
        assert get(server.url + "/metrics")[0] == 401
        status, content_type = get(server.url + "/metrics", "tok-123")
        assert status == 200 and content_type.count("charset") == 1, content_type
    finally:
        assert server.stop() == 0
    server = Server({**env, "DECODE_WORKERS": "0"}, tmp_path / "serve.log", host="0.0.0.0")
    try:
        assert get(server.url + "/metrics")[0] == 403
    finally:
        assert server.stop() == 0
