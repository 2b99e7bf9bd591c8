"""GET /runs/<run_id>?exp=...&sig=...: one run's transcript; GET /runs/<run_id>/events?exp=...&sig=...&after=N:
its news.

The signature (`links`) is checked first, and a bad or missing one answers exactly like an unknown
run (404), so run ids cannot be probed; a link this server signed whose expiry has passed answers 410
with how to see the run now (sign in on the dashboard). While the run is on (no record.json yet, job queued or
running) the page polls the events endpoint (static/live.js) with `after` = the length in bytes of
transcript.jsonl it has shown; the answer carries the re-rendered transcript only when the file
grew. Polling, not server-sent events: each viewer would otherwise hold one of the server's few
request threads for as long as the run lasts, and those threads also answer GitHub's webhooks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from flask import Blueprint, abort, jsonify, make_response, render_template, request
from werkzeug.wrappers import Response

from bot.server.context import app_context
from bot.github.links import Link, check
from bot.server.render import transcript_html
from bot.server.run_views import LIVE_STATES, job_of, run_dir
from bot.run.result import read_record
from bot.server.web import secure
from bot.run.transcript import JSONL_NAME, load_events

runs = Blueprint("runs", __name__)
runs.after_request(secure)


@dataclass(frozen=True)
class RunState:
    """What the page needs to know of a run without reading its events."""

    directory: Path | None
    state: str
    live: bool
    size: int  # bytes of transcript.jsonl so far


def _run(run_id: str) -> RunState:
    ctx = app_context()
    link = check(ctx.settings, run_id, request.args.get("exp"), request.args.get("sig"))
    if link is Link.EXPIRED:
        abort(make_response(render_template(
            "message.html", user=None, title="This link has expired",
            text="Transcript links expire after DECODE_KEEP_DAYS days. To see the run, sign in on the "
                 "dashboard with GitHub: it lists the runs of the repositories you can read."), 410))
    if link is not Link.GOOD:
        abort(404)
    directory, job = run_dir(ctx.settings.store.data_dir, run_id), job_of(ctx.store, run_id)
    if directory is None and job is None:
        abort(404)
    record = read_record(directory)
    live = record is None and (job is None or job.state in LIVE_STATES)
    state = job.state if job is not None else "running" if live else (record and record.stop_reason) or "ended"
    try:
        size = (directory / JSONL_NAME).stat().st_size if directory is not None else 0
    except OSError:
        size = 0
    return RunState(directory, state, live, size)


def _html(run: RunState) -> str:
    path = run.directory / JSONL_NAME if run.directory is not None else None
    if path is None or not path.exists():
        return "<p>The run has not started yet; this page follows it.</p>"
    return transcript_html(load_events(path))


@runs.get("/runs/<run_id>")
def transcript(run_id: str) -> str:
    run = _run(run_id)
    return render_template("run.html", user=None, run_id=run_id, run=run, html=_html(run),
                           exp=request.args["exp"], sig=request.args["sig"])


@runs.get("/runs/<run_id>/events")
def events(run_id: str) -> Response:
    run = _run(run_id)
    answer: dict[str, object] = {"after": run.size, "live": run.live, "state": run.state}
    if str(run.size) != request.args.get("after") or not run.live:
        answer["html"] = _html(run)
    return jsonify(answer)
