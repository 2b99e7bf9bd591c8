"""Sign-in with GitHub through the App's OAuth client (user-to-server), and sign-out.

GET /login sends the browser to GitHub with a fresh `state` kept in the signed session cookie;
GET /login/callback accepts only that state (CSRF), trades the code for a user token, reads the
user's login and readable repositories (`github_user`), keeps them in a server-side session
(`sessions`) and forgets the token. POST /logout (with the page's CSRF token) ends the session.
Without GITHUB_CLIENT_ID and GITHUB_CLIENT_SECRET the dashboard explains how to set them.
"""

from __future__ import annotations

import hmac
import logging
import secrets

from flask import Blueprint, redirect, render_template, request, session
from flask.typing import ResponseReturnValue
from werkzeug.wrappers import Response

from bot.config import GitHubSettings, WebSettings
from bot.server.context import app_context
from bot.server.github_user import SignInError, authorize_url, exchange_code, login_of, readable_repos
from bot.server.sessions import Sessions, User
from bot.server.web import SESSION_HOURS, secure

log = logging.getLogger("decode.web")
auth = Blueprint("auth", __name__)
auth.after_request(secure)


def configured(github: GitHubSettings) -> bool:
    """Whether the App's OAuth client is set, so people can sign in."""
    return bool(github.client_id and github.client_secret)


def current_user() -> User | None:
    """The signed-in user of this request, or None."""
    return Sessions(app_context().settings.store.data_dir).user(session.get("sid"))


def callback_url(web: WebSettings) -> str:
    """Where GitHub sends the browser back: DECODE_PUBLIC_URL/login/callback (the App's Callback URL)."""
    return (web.public_url or request.host_url.rstrip("/")) + "/login/callback"


def _same(expected: str, given: str) -> bool:
    return hmac.compare_digest(expected.encode(), given.encode())  # bytes: any text compares, in constant time


def _problem(title: str, text: str, status: int) -> tuple[str, int]:
    return render_template("message.html", title=title, text=text, user=None), status


@auth.get("/login")
def login() -> Response:
    settings = app_context().settings
    if not configured(settings.github):
        return redirect("/")
    state = secrets.token_urlsafe(32)
    session["oauth_state"] = state
    return redirect(authorize_url(settings.github, callback_url(settings.web), state))


@auth.get("/login/callback")
def callback() -> ResponseReturnValue:
    settings = app_context().settings
    expected, got = session.pop("oauth_state", None), request.args.get("state", "")
    if not configured(settings.github) or not expected or not _same(str(expected), got):
        return _problem("Sign-in not recognised", "This sign-in was not started from this page, or it expired: "
                        "sign in again.", 400)
    if request.args.get("error") or not request.args.get("code"):
        return _problem("Not signed in", "GitHub did not sign you in "
                        f"({request.args.get('error', 'no code')}): sign in again.", 400)
    try:
        token = exchange_code(settings.github, request.args["code"], callback_url(settings.web))
        login, repos = login_of(settings.github, token), readable_repos(settings.github, token)
    except SignInError as e:
        log.warning("sign-in failed: %s", e)
        return _problem("Sign-in failed", str(e), 502)
    sid = Sessions(settings.store.data_dir).create(login, repos, SESSION_HOURS * 3600)
    session.clear()
    session.permanent = True
    session.update(sid=sid, csrf=secrets.token_urlsafe(32))
    log.info("%s signed in (%d repositories readable)", login, len(repos))
    return redirect("/")


@auth.post("/logout")
def logout() -> Response:
    if not _same(str(session.get("csrf", "")), request.form.get("csrf", "")):
        return redirect("/")  # a cross-site or stale form: nothing to do
    Sessions(app_context().settings.store.data_dir).delete(session.get("sid"))
    session.clear()
    return redirect("/")
