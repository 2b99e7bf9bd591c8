"""The GitHub App webhook server: a Flask app factory with a blueprint per concern.

Without App credentials, `create_app(settings, store)` builds the app in setup mode: /webhook answers
503 and /setup creates the App (bot/server/setup.py), then calls `on_configured`. The app
needs a `JobStore`; the worker pool that drains it is started by `decode serve`
(bot/server/run.py), not here, so tests and WSGI servers get a plain app.
Given the checks of the credentials and of the model (`bot.server.health.Recheck`), /healthz
also answers 503 while GitHub refuses the credentials or the model's check fails.
"""

from __future__ import annotations

from collections.abc import Callable

from flask import Flask

from bot.config import Settings
from bot.core.errors import ConfigError
from bot.server.context import KEY, AppContext, HealthCheck
from bot.server.metrics import Metrics
from bot.jobs.store import JobStore
from bot.github.triggers import Router, Rules

MAX_BODY = 25 * 1024 * 1024  # GitHub caps payloads at 25 MB


def create_app(settings: Settings, store: JobStore, credentials: HealthCheck | None = None,
               on_configured: Callable[[Settings], None] | None = None, model: HealthCheck | None = None) -> Flask:
    """The webhook app for `settings`, queuing into `store` (the process's, from `open_store`); `credentials`
    and `model`, when given, are part of /healthz; `on_configured` runs once /setup has created the App."""
    if settings.github.has_credentials and not settings.github.webhook_secret:
        raise ConfigError("GITHUB_WEBHOOK_SECRET is not set: set it to the webhook secret of the GitHub App; "
                          "the server does not accept unsigned deliveries")
    from bot.server.health import health
    from bot.server.setup import init_setup
    from bot.server.webhooks import webhooks
    from bot.server.web_ui import web_blueprints

    app = Flask("decode-bot")
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY
    app.extensions[KEY] = AppContext(settings=settings, store=store, metrics=Metrics(store.counts),
                                     router=Router(Rules.of(settings.github)), credentials=credentials,
                                     model=model)
    app.register_blueprint(webhooks)
    app.register_blueprint(health)
    for blueprint in web_blueprints():  # the dashboard, transcript pages and sign-in: docs/web.md
        app.register_blueprint(blueprint)
    init_setup(app, on_configured)
    return app
