"""POST /webhook: verify, decide, store durably, answer.

202 once the job is committed to the store, 200 for an event we ignore or a
redelivery or replayed body we already have, 401 for a bad or missing signature, 400 for a
malformed body or a triggering one older than the replay window (intake.STALE_AFTER_S), 413 for a body over GitHub's 25 MB (answered by waitress
from the Content-Length before the body is read, under `decode serve`), 503 when the store cannot
take the job (so it was not accepted), and 503 while the server has no App yet (setup mode: nothing is
read, signed or not, until /setup is finished).
"""

from __future__ import annotations

import logging

from flask import Blueprint, jsonify, request
from flask.typing import ResponseReturnValue
from werkzeug.exceptions import RequestEntityTooLarge

from bot.server.context import app_context
from bot.server.intake import body_digest, triage
from bot.jobs.sqlite import StoreError

log = logging.getLogger("decode.webhook")
webhooks = Blueprint("webhooks", __name__)


@webhooks.post("/webhook")
def receive() -> ResponseReturnValue:
    ctx = app_context()
    if not ctx.settings.github.webhook_secret:
        ctx.metrics.deliveries.labels("unconfigured").inc()
        return jsonify(outcome="unconfigured", error="this server has no GitHub App yet: finish setup at /setup "
                       "(or set GITHUB_APP_ID, GITHUB_APP_PRIVATE_KEY and GITHUB_WEBHOOK_SECRET)"), 503
    delivery = request.headers.get("X-GitHub-Delivery", "")
    try:
        body = request.get_data(cache=False)
    except RequestEntityTooLarge:
        ctx.metrics.deliveries.labels("too_large").inc()
        return jsonify(error="the body is larger than GitHub's 25 MB limit"), 413
    verdict = triage(request.headers, body, ctx.settings.github.webhook_secret or "", ctx.router)
    outcome, status, message, job_id = verdict.outcome, verdict.status, verdict.message, None
    if verdict.job is not None:
        try:
            stored = ctx.store.record_delivery(delivery, request.headers["X-GitHub-Event"], outcome, verdict.job,
                                                  digest=body_digest(body))
        except StoreError as e:  # not stored, so not accepted: GitHub shows the 503 for a manual redelivery
            log.error("delivery not stored: %s", e, extra={"delivery_id": delivery})
            ctx.metrics.deliveries.labels("store_error").inc()
            return jsonify(outcome="store_error", message=str(e)), 503
        if stored is False:
            outcome, status, message = "duplicate", 200, "this delivery (or the same body) was already received"
        else:
            job_id = stored
            if ctx.runner is not None:  # this process runs jobs: start it now, not at the next poll
                ctx.runner.wake()
    ctx.metrics.deliveries.labels(outcome).inc()
    log.info("delivery %s: %s (%s)", outcome, message, request.headers.get("X-GitHub-Event"),
             extra={"delivery_id": delivery, "job_id": job_id})
    answer: dict[str, object] = {"outcome": outcome, "message": message}
    if job_id is not None:
        answer["job"] = job_id
    return jsonify(answer), status
