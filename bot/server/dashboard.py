"""GET /: the runs a signed-in user may see, newest first, with per-day totals.

A user sees the runs of the repositories they can read on GitHub (as listed at sign-in), nothing
else; `?repo=owner/name` and `?state=queued|running|done|failed` narrow the list. A page lists `LIMIT`
runs; `?before=<job id>` the next older page (linked below the table), each page costing what it lists
however many runs the store holds (`JobStore.runs`). The totals are over the runs listed. Above them, the queue: the queued jobs of those repositories in
the order they will be claimed, with their place in line (counted over every repository), why each
waits and since when (bot/jobs/queue.py), `QUEUE_LIMIT` at a time: `?queued_after=<place>` the next ones
(linked below it), read from the front of the line, never the whole queue. A server in setup mode (no App credentials, no token) says
so here and links /setup (never its key: anyone may open /).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone

from flask import Blueprint, render_template, request, session

from bot.server.context import app_context
from bot.github.links import run_paths
from bot.server.oauth import callback_url, configured, current_user
from bot.server.run_views import RunRow, daily_totals, row_of
from bot.server.web import secure
from bot.core.names import key_parts
from bot.jobs.queue import Waiting, page
from bot.jobs.sqlite import STATES

LIMIT = 50  # runs a page; `?before=` the next ones
QUEUE_LIMIT = 50  # queued jobs a page; `?queued_after=` the next ones
home = Blueprint("dashboard", __name__)
home.after_request(secure)


@home.get("/")
def index() -> str:
    ctx = app_context()
    settings = ctx.settings
    if not settings.github.has_credentials:
        return render_template("setup_mode.html", user=None)
    if not configured(settings.github):
        return render_template("setup_signin.html", user=None, callback=callback_url(settings.web))
    user = current_user()
    if user is None:
        return render_template("signin.html", user=None)
    repo = (request.args.get("repo") or "").strip().lower() or None
    state = request.args.get("state") if request.args.get("state") in STATES else None
    repos = user.repos if repo is None else user.repos & {repo}
    before = request.args.get("before", type=int)
    jobs = ctx.store.runs(LIMIT, repos=repos, state=state, before=before)
    rows = [row_of(job, settings.store.data_dir) for job in jobs]
    older = jobs[-1].id if len(jobs) == LIMIT else None
    queue, later = [], None
    if state in (None, "queued"):
        after = max(request.args.get("queued_after", 0, type=int), 0)
        waiting, more = page(ctx.store, after, QUEUE_LIMIT, lambda w: w.repo in repos)
        queue = [_queued(w) for w in waiting]
        later = queue[-1].position if more and queue else None
    return render_template("dashboard.html", user=user, csrf=session.get("csrf", ""), rows=rows, queue=queue,
                           later=later, totals=daily_totals(rows), repo=repo, state=state, states=STATES,
                           older=older, repos=sorted(user.repos), links=_links(rows))


@dataclass(frozen=True)
class QueuedRow:
    """One line of the queue table."""

    position: int
    repo: str
    number: int | None
    issue: str | None  # its link
    reason: str
    since: str  # when it was queued, UTC
    waited_s: float


def _queued(w: Waiting) -> QueuedRow:
    settings = app_context().settings
    repo, number = key_parts(w.job.key)
    since = datetime.fromtimestamp(w.job.created_at, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    issue = f"{settings.github.web_url}/{repo}/issues/{number}" if number is not None else None
    return QueuedRow(w.position, repo, number, issue, w.reason, since, max(0.0, time.time() - w.job.created_at))


def _links(rows: list[RunRow]) -> dict[str, dict[str, str | None]]:
    """Each row's links: its transcript page (signed), its issue and its pull request."""
    settings = app_context().settings
    pages = run_paths(settings.store, [row.run_id for row in rows])
    links = {}
    for row in rows:
        issue = f"{settings.github.web_url}/{row.repo}/issues/{row.number}" if row.number is not None else None
        pr = row.pr_url if row.pr_url and re.match(r"https?://", row.pr_url) else None
        links[row.run_id] = {"transcript": pages[row.run_id], "issue": issue, "pr": pr}
    return links
