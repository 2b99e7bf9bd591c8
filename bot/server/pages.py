"""GET /runs/<run_id>?exp=...&sig=...[&page=N]: one run's transcript, a page of turns at a time;
GET /runs/<run_id>/events?exp=...&sig=...&after=N&size=M: its news.

The signature (`links`) is checked first, and a bad or missing one answers exactly like an unknown
run (404), so run ids cannot be probed; a link this server signed whose expiry has passed answers 410
with how to see the run now (sign in on the dashboard). While the run is on (no record.json yet, job queued or
running) the page shows the last page and polls the events endpoint (static/live.js) with `after` = where
the last turn it shows begins and `size` = the bytes of transcript.jsonl it has seen; only when the file
grew does the answer carry what is new: the turns finished since (`done`, appended), the turn under way
(`open`, replaced) and the figures (`head`). So a page and each update cost what they show, never the
whole run (bot/run/transcript_pages.py). Polling, not server-sent events: each viewer would otherwise hold
one of the server's few request threads for as long as the run lasts, and those threads also answer
GitHub's webhooks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from flask import Blueprint, abort, jsonify, make_response, render_template, request
from werkzeug.wrappers import Response

from bot.server.context import app_context
from bot.core.names import best_of_run_id
from bot.github.links import Link, check, run_paths
from bot.server.render import MAX_BLOCK_CHARS, markdown_html
from bot.server.run_views import LIVE_STATES, job_of, run_dir
from bot.run.repo_config import MAX_ATTEMPTS
from bot.run.result import read_record
from bot.server.web import secure
from bot.run.transcript import JSONL_NAME, render_events, render_head
from bot.run.transcript_pages import Index, index, read_span

runs = Blueprint("runs", __name__)
runs.after_request(secure)


@dataclass(frozen=True)
class RunState:
    """What the page needs to know of a run without reading its events."""

    directory: Path | None
    state: str
    live: bool
    size: int  # bytes of transcript.jsonl so far
    attempts: tuple[tuple[int, str], ...] = ()  # a best-of-N run's: (attempt, its signed page); none of its own


def _run(run_id: str) -> RunState:
    ctx = app_context()
    link = check(ctx.settings.store, run_id, request.args.get("exp"), request.args.get("sig"))
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
    return RunState(directory, state, live, size, () if directory is not None else _attempts(run_id))


def _attempts(run_id: str) -> tuple[tuple[int, str], ...]:
    """Each attempt of `run_id` that has started, with its signed page, when it is a best-of-N run (decode.yml's
    `attempts`: each attempt is a run of its own, `best_of_run_id`, and the run itself has no transcript)."""
    settings = app_context().settings
    ids = {best_of_run_id(run_id, k): k for k in range(1, MAX_ATTEMPTS + 1)}
    started = [rid for rid in ids if run_dir(settings.store.data_dir, rid) is not None]
    return tuple((ids[rid], page) for rid, page in run_paths(settings.store, started).items()) if started else ()


@dataclass(frozen=True)
class Shown:
    """What a page (or an update) shows: the head with the figures, the finished turns, the turn under way."""

    head: str
    done: str
    open: str
    after: int  # where `open` begins in transcript.jsonl
    page: int
    pages: int


def _shown(run: RunState, page: int | None, after: int | None = None) -> Shown:
    """Page `page` (None: the last while the run is live, else the first), or with `after` the news since."""
    path = run.directory / JSONL_NAME if run.directory is not None else None
    found = index(path) if path is not None and path.exists() else Index()
    if path is None and run.attempts:
        listed = "\n".join(f"- [attempt {k}]({page})" for k, page in run.attempts)
        return Shown(markdown_html(f"This run is several attempts at once (decode.yml's `attempts`), each with its "
                                   f"own transcript:\n\n{listed}"), "", "", 0, 1, 1)
    if path is None or not found.size:
        return Shown("<p>The run has not started yet; this page follows it.</p>", "", "", 0, 1, 1)
    number = page or (found.pages if run.live else 1)
    begin, end = found.span(number) if after is None else (after, found.size)
    split = max(begin, found.last_turn_at()) if run.live and end == found.size else end
    head = render_head(found.start, found.figures_markdown(), max_block_chars=MAX_BLOCK_CHARS)
    repo = found.start.get("repo")
    return Shown(markdown_html(head), _html(path, begin, split, repo), _html(path, split, end, repo), split, number,
                 found.pages)


def _html(path: Path, begin: int, end: int, repo: str | None) -> str:
    if end <= begin:
        return ""
    events = read_span(path, begin, end)
    return markdown_html(render_events(events, max_block_chars=MAX_BLOCK_CHARS, repo=repo))


@runs.get("/runs/<run_id>")
def transcript(run_id: str) -> str:
    run = _run(run_id)
    page = request.args.get("page", type=int)
    return render_template("run.html", user=None, run_id=run_id, run=run, shown=_shown(run, page),
                           exp=request.args["exp"], sig=request.args["sig"])


@runs.get("/runs/<run_id>/events")
def events(run_id: str) -> Response:
    run = _run(run_id)
    answer: dict[str, object] = {"size": run.size, "live": run.live, "state": run.state}
    if str(run.size) != request.args.get("size") or not run.live:
        shown = _shown(run, None, after=request.args.get("after", 0, type=int))
        answer.update(head=shown.head, done=shown.done, open=shown.open, after=shown.after)
    return jsonify(answer)
