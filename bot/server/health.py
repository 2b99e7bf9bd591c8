"""GET /healthz (200 when the store is writable, GitHub takes the credentials and the model answers) and
GET /metrics.

/metrics is not public: with DECODE_METRICS_TOKEN it wants `Authorization: Bearer <token>` (401
otherwise); without one it answers only when `decode serve` is bound to loopback and no reverse proxy
forwards the request, 403 otherwise (`metrics.metrics_refusal`; docs/web.md says how to scrape from elsewhere).

The credentials and the model are each a `Recheck`: asked at start, then again at most every
`DECODE_HEALTH_RECHECK_SECONDS` on a thread of their own, so a load balancer polling /healthz neither
becomes traffic to GitHub or Anthropic nor waits for it, and an App key revoked mid-run turns
/healthz to 503. While the model's check fails (rejected or missing credentials of the provider, a DECODE_MODEL
the credentials cannot use, the API unreachable), the worker pool claims nothing (`model_check`): jobs wait
in the store instead of failing on their issues, and run once a recheck passes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from flask import Blueprint, Response, jsonify, request
from flask.typing import ResponseReturnValue
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from bot.config import ModelSettings
from bot.core.errors import DecodeError
from bot.model import Model, make_model
from bot.server.context import app_context
from bot.server.metrics import metrics_refusal

health = Blueprint("health", __name__)
log = logging.getLogger("decode.health")


class Recheck:
    """`ask()` (which raises a `DecodeError` saying what to fix) at most once every `every_s` seconds;
    its last answer in between. `on_change(error)` runs when the answer turns from good to bad or back
    (the first answer counts as a change)."""

    def __init__(self, ask: Callable[[], object], every_s: float, *,
                 on_change: Callable[[DecodeError | None], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.every_s = every_s
        self._ask = ask
        self._on_change = on_change
        self._clock = clock
        self._asking = threading.Lock()  # one question at a time
        self._lock = threading.Lock()  # guards the answer and `_checking`
        self._at: float | None = None
        self._error: DecodeError | None = None
        self._checking = False

    def now(self) -> DecodeError | None:
        """Ask now and wait for the answer: why it is refused, None when it is not."""
        with self._asking:
            try:
                self._ask()
                error = None
            except DecodeError as e:
                error = e
            with self._lock:
                changed = self._at is None or (error is None) != (self._error is None)
                self._error, self._at = error, self._clock()
            if changed and self._on_change is not None:
                self._on_change(error)
            return error

    @property
    def answered(self) -> bool:
        """Whether the first answer has come."""
        with self._lock:
            return self._at is not None

    def hold(self) -> str | DecodeError | None:
        """Why work must wait: the last refusal, or that the first answer has not come yet; None to go on."""
        error = self.error()
        return error if error is not None or self.answered else "the first check has not answered yet"

    def error(self) -> DecodeError | None:
        """The last answer, at once (None before the first); when it is older than `every_s`, a recheck
        starts on a thread of its own and a later call sees its answer."""
        with self._lock:
            stale = self._at is None or self._clock() - self._at >= self.every_s
            if stale and not self._checking:
                self._checking = True
                threading.Thread(target=self._recheck, name="recheck", daemon=True).start()
            return self._error

    def _recheck(self) -> None:
        try:
            self.now()
        finally:
            with self._lock:
                self._checking = False


def model_check(model: ModelSettings, client: Model | None, every_s: float) -> Recheck | None:
    """The check of `model` through the process's shared `client` (`bot.model.shared_model`; None when the
    provider's configuration is incomplete, whose check then fails naming the variable to set), as `decode run`
    does it before each run, asked again at most every `every_s`; None for a scripted session, which needs no
    credentials. Each change of its answer is logged."""
    if model.name.startswith("scripted:"):
        return None

    def changed(error: DecodeError | None) -> None:
        if error is None:
            log.info("the model %s answers: queued jobs run", model.name)
        else:
            log.error("%s; jobs wait in the store until the model answers (asked again every %g s, "
                      "DECODE_HEALTH_RECHECK_SECONDS)", error, every_s)

    return Recheck(client.check if client is not None else lambda: make_model(model), every_s, on_change=changed)


@health.get("/healthz")
def healthz() -> ResponseReturnValue:
    ctx = app_context()
    if not ctx.store.writable():
        return jsonify(status="unavailable", reason="the job store is not writable: check DECODE_DATA_DIR"), 503
    for check in (ctx.credentials, ctx.model):
        if check is not None and (why := check.hold()) is not None:
            return jsonify(status="unavailable", reason=str(why)), 503
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
