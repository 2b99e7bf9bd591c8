"""GET /: the runs a signed-in user may see, newest first, with per-day totals.

A user sees the runs of the repositories they can read on GitHub (as listed at sign-in), nothing
else; `?repo=owner/name` and `?state=queued|running|done|failed` narrow the list. The totals are
over the runs listed (the newest `LIMIT`). A server in setup mode (no App credentials, no token) says
so here and links /setup (never its key: anyone may open /).
"""

from __future__ import annotations

import re

from flask import Blueprint, render_template, request, session

from bot.github.app_credentials import has_credentials
from bot.server.context import app_context
from bot.github.links import run_path
from bot.server.oauth import callback_url, configured, current_user
from bot.server.run_views import RunRow, daily_totals, row_of
from bot.server.web import secure
from bot.jobs.sqlite import STATES

LIMIT = 200
home = Blueprint("dashboard", __name__)
home.after_request(secure)


@home.get("/")
def index() -> str:
    ctx = app_context()
    settings = ctx.settings
    if not has_credentials(settings):
        return render_template("setup_mode.html", user=None)
    if not configured(settings.github):
        return render_template("setup_signin.html", user=None, callback=callback_url(settings.web))
    user = current_user()
    if user is None:
        return render_template("signin.html", user=None)
    repo = (request.args.get("repo") or "").strip().lower() or None
    state = request.args.get("state") if request.args.get("state") in STATES else None
    repos = user.repos if repo is None else user.repos & {repo}
    rows = [row_of(job, settings.store.data_dir) for job in ctx.store.runs(LIMIT, repos=repos, state=state)]
    return render_template("dashboard.html", user=user, csrf=session.get("csrf", ""), rows=rows,
                           totals=daily_totals(rows), repo=repo, state=state, states=STATES,
                           repos=sorted(user.repos), links={row.run_id: _links(row) for row in rows})


def _links(row: RunRow) -> dict[str, str | None]:
    settings = app_context().settings
    issue = f"{settings.github.web_url}/{row.repo}/issues/{row.number}" if row.number is not None else None
    pr = row.pr_url if row.pr_url and re.match(r"https?://", row.pr_url) else None
    return {"transcript": run_path(settings, row.run_id), "issue": issue, "pr": pr}
