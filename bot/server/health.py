"""GET /healthz (200 when the store is writable and GitHub takes the credentials) and GET /metrics.

/metrics is not public: with DECODE_METRICS_TOKEN it wants `Authorization: Bearer <token>` (401
otherwise); without one it answers only when `decode serve` is bound to loopback and no reverse proxy
forwards the request, 403 otherwise (`metrics.metrics_refusal`; docs/web.md says how to scrape from elsewhere).

The credentials are re-checked at most every `DECODE_HEALTH_RECHECK_SECONDS`
(a `CredentialCheck`), so a load balancer polling /healthz does not become
traffic to GitHub, and an App key revoked mid-run turns /healthz to 503.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from flask import Blueprint, Response, jsonify, request
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from bot.core.errors import DecodeError
from bot.github.auth import Credentials
from bot.server.context import app_context
from bot.server.metrics import metrics_refusal

health = Blueprint("health", __name__)


class CredentialCheck:
    """`credentials.check()` at most once every `every_s` seconds; its last answer in between."""

    def __init__(self, credentials: Credentials, every_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.credentials = credentials
        self.every_s = every_s
        self._clock = clock
        self._lock = threading.Lock()
        self._at: float | None = None
        self._error: DecodeError | None = None

    def error(self, *, fresh: bool = False) -> DecodeError | None:
        """Why GitHub does not take the credentials (None when it does); `fresh` skips the cache."""
        with self._lock:  # one caller asks GitHub; the others wait for its answer
            now = self._clock()
            if fresh or self._at is None or now - self._at >= self.every_s:
                try:
                    self.credentials.check()
                    self._error = None
                except DecodeError as e:
                    self._error = e
                self._at = now
            return self._error


@health.get("/healthz")
def healthz():  # type: ignore[no-untyped-def]
    ctx = app_context()
    if not ctx.store.writable():
        return jsonify(status="unavailable", reason="the job store is not writable: check DECODE_DATA_DIR"), 503
    if ctx.credentials is not None and (error := ctx.credentials.error()) is not None:
        return jsonify(status="unavailable", reason=str(error)), 503
    return jsonify(status="ok")


@health.get("/metrics")
def metrics() -> Response:
    ctx = app_context()
    proxied = "X-Forwarded-For" in request.headers or "Forwarded" in request.headers
    refusal = metrics_refusal(ctx.settings.web.metrics_token, request.headers.get("Authorization", ""),
                              ctx.bind, proxied)
    if refusal is not None:
        status, text = refusal
        headers = {"WWW-Authenticate": 'Bearer realm="metrics"'} if status == 401 else {}
        return Response(text, status=status, mimetype="text/plain", headers=headers)
    return Response(generate_latest(ctx.metrics.registry), content_type=CONTENT_TYPE_LATEST)
