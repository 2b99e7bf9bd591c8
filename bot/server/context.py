"""What the webhook app's views share: one typed object, built once by `create_app`.

Views read it with `app_context()`; `decode serve` and the Modal control app reach
the same object through the app they built, never through a loose dict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from flask import current_app
from flask.sansio.app import App

from bot.config import Settings
from bot.core.errors import DecodeError
from bot.jobs.lease import LeaseRunner
from bot.server.metrics import Metrics
from bot.jobs.store import JobStore
from bot.github.triggers import Router

KEY = "decode"


class HealthCheck(Protocol):
    """A check /healthz asks: the credentials' or the model's (bot.server.health.Recheck)."""

    def error(self) -> DecodeError | None: ...

    def hold(self) -> str | DecodeError | None: ...


@dataclass
class AppContext:
    settings: Settings  # the current settings: /setup replaces them once it created the App; read them per request
    store: JobStore
    metrics: Metrics
    router: Router
    credentials: HealthCheck | None = None  # when given, /healthz is 503 while GitHub refuses them
    model: HealthCheck | None = None  # when given, /healthz is 503 while the model's check fails
    runner: LeaseRunner | None = None  # the runner of this process's jobs (serve's pool, the Modal dispatcher)
    bind: str | None = None  # the host `decode serve` listens on; /metrics needs its token unless it is loopback


def app_context(app: App | None = None) -> AppContext:
    """The context of `app`, by default the app handling the current request."""
    context: AppContext = (app or current_app).extensions[KEY]
    return context
