"""GET /healthz (200 when the store is writable) and GET /metrics (Prometheus)."""

from __future__ import annotations

from flask import Blueprint, Response, current_app, jsonify
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

health = Blueprint("health", __name__)


@health.get("/healthz")
def healthz():  # type: ignore[no-untyped-def]
    ctx = current_app.extensions["decode"]
    if ctx["store"].writable():
        return jsonify(status="ok")
    return jsonify(status="the job store is not writable: check DECODE_DATA_DIR"), 503


@health.get("/metrics")
def metrics() -> Response:
    registry = current_app.extensions["decode"]["metrics"].registry
    return Response(generate_latest(registry), mimetype=CONTENT_TYPE_LATEST)
