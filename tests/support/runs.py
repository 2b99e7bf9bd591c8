"""Runs for the web UI's tests: jobs stored through POST /webhook as GitHub delivers them, moved to a
state through the store's own lease calls, with run directories as the pipeline leaves them; a signed-in
session; and the app served by a real WSGI server (waitress) on 127.0.0.1 in a thread."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from flask import Flask
from flask.testing import FlaskClient

from bot.config import Settings
from bot.run.result import RECORD
from bot.server import create_app
from bot.server.sessions import Sessions
from bot.server.signature import sign
from bot.jobs.sqlite import Store
from tests.fakes.github_oauth import oauth_of
from tests.fakes.webhook_examples import example

SECRET = "whsec-web-0123456789abcdef"
WORKER = "web-test-worker"


def web_app(data_dir: Path, store: Store, **changes: Any) -> Flask:
    """The app with the web UI, its data in `data_dir`; `changes` go to its Settings."""
    return create_app(Settings(github_webhook_secret=SECRET, data_dir=data_dir, **changes), store)


def github_app(data_dir: Path, store: Store, fake: Any, **changes: Any) -> Flask:
    """The app signing people in through the fake GitHub `fake` and its OAuth client."""
    client = oauth_of(fake)
    return web_app(data_dir, store, **{"github_api_url": fake.api_url, "github_client_id": client.client_id,
                                       "github_client_secret": client.client_secret, **changes})


def add_run(client: FlaskClient, store: Store, *, repo: str, number: int, sender: str = "alice",
            state: str = "queued", result: dict | None = None, error: str | None = None) -> str:
    """A job for issue `repo#number` labeled by `sender`, delivered to /webhook, then moved to `state`;
    returns its run id."""
    payload = example("issues", "labeled", repo=repo, sender=sender, sender_type="User", label__name="agent",
                      issue__number=number)
    body = json.dumps(payload).encode()
    answer = client.post("/webhook", data=body, headers={
        "Content-Type": "application/json", "X-GitHub-Event": "issues", "X-GitHub-Delivery": f"d-{repo}-{number}",
        "X-Hub-Signature-256": sign(body, SECRET)})
    assert answer.status_code == 202, answer.get_data(as_text=True)
    job_id = answer.get_json()["job"]
    if state != "queued":
        others = []
        while (claimed := store.claim(WORKER)) is not None and claimed.id != job_id:
            others.append(claimed.id)
        assert claimed is not None, f"job {job_id} could not be claimed"
        for other in others:
            store.release(other, WORKER)
        if state in ("done", "failed"):
            store.finish(job_id, WORKER, state, result=result, error=error)
    return f"job-{job_id}"


def turn(n: int, text: str, *, command: str = "ls", output: str = "README.md") -> list[dict]:
    """The events of one agent turn: the model's text and a bash call with its result."""
    call_id = f"call-{n}"
    return [
        {"type": "model_response", "turn": n, "content": [{"type": "text", "text": text}], "stop_reason": "tool_use",
         "usage": {"input_tokens": 100 * n, "output_tokens": 10 * n}, "cost_usd": 0.01 * n, "duration_s": 1.0},
        {"type": "tool_call", "turn": n, "id": call_id, "name": "bash", "input": {"command": command}},
        {"type": "tool_result", "turn": n, "id": call_id, "name": "bash", "output": output, "is_error": False},
    ]


def write_run(data_dir: Path, run_id: str, events: list[dict], *, record: dict | None = None) -> Path:
    """The run directory as the pipeline leaves it: transcript.jsonl, and record.json when `record` is given
    (written as given: a dict of an earlier shape stays that shape)."""
    directory = data_dir / "runs" / run_id
    directory.mkdir(parents=True, exist_ok=True)
    append(directory, events)
    if record is not None:
        (directory / RECORD).write_text(json.dumps({"run_id": run_id, **record}))
    return directory


def append(directory: Path, events: list[dict]) -> None:
    """Append events to the run's transcript.jsonl, one line each, as `Transcript.record` does."""
    with open(directory / "transcript.jsonl", "a", encoding="utf-8") as f:
        for event in events:
            f.write(json.dumps({"type": event["type"], "t": 0.0, "at": "2026-01-01T00:00:00.000Z", **event},
                               ensure_ascii=False) + "\n")


def sign_in(client: FlaskClient, data_dir: Path, login: str, repos: set[str], lifetime_s: float = 3600) -> str:
    """`client` signed in as `login`, who may read `repos` (what the sign-in callback leaves); the session id."""
    sid = Sessions(data_dir).create(login, repos, lifetime_s)
    with client.session_transaction() as session:
        session.update(sid=sid, csrf="test-csrf")
    return sid


@contextmanager
def serving(app: Flask) -> Iterator[str]:
    """`app` under waitress on a free port of 127.0.0.1, for a browser; yields its base URL."""
    from waitress import create_server

    from bot.server.run import close_server

    server = create_server(app, host="127.0.0.1", port=0, threads=4)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.effective_port}"
    finally:
        close_server(server)
        thread.join(timeout=5)
        assert not thread.is_alive(), "waitress did not stop"
