"""Webhook deliveries signed exactly as GitHub signs them, and the app under test."""

from __future__ import annotations

import json
import uuid

import pytest

from bot.config import Settings
from bot.server import create_app
from bot.server.signature import sign
from bot.jobs.sqlite import Store

SECRET = "whsec-test-0123456789abcdef"


def delivery(event: str, payload: dict | bytes, *, secret: str = SECRET, delivery_id: str | None = None
             ) -> tuple[bytes, dict[str, str]]:
    """(body, headers) as GitHub would send them (https://docs.github.com/en/webhooks/webhook-events-and-payloads)."""
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "GitHub-Hookshot/5f1e4a2",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery_id or str(uuid.uuid4()),
        "X-GitHub-Hook-ID": "123456",
        "X-Hub-Signature-256": sign(body, secret),
    }
    return body, headers


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "jobs.sqlite3")
    yield s
    s.close()


@pytest.fixture
def app(store, tmp_path):
    settings = Settings(github_webhook_secret=SECRET, data_dir=tmp_path)
    return create_app(settings, store)


@pytest.fixture
def client(app):
    return app.test_client()
