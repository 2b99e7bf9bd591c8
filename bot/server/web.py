"""What every page of the web UI shares: its static files, templates, headers and session cookie.

The `web` blueprint serves /assets (CSS and the one script, never inline, so the
Content-Security-Policy can forbid inline script). `secure` is each page blueprint's
after-request hook: a strict CSP, no framing, no sniffing, and no Referer, since a transcript
URL carries its signature. Registering the blueprint configures Flask's signed session cookie:
its key lives in DECODE_DATA_DIR (`session.key`, 0600), it is HttpOnly, SameSite=Lax, and
Secure when DECODE_PUBLIC_URL is https.
"""

from __future__ import annotations

from datetime import timedelta

from flask import Blueprint, Response
from flask.blueprints import BlueprintSetupState

from bot.server.context import app_context
from bot.core.keys import data_key

SESSION_KEY_FILE = "session.key"
SESSION_HOURS = 8  # GitHub's user access tokens expire after 8 hours; access is re-read at each sign-in
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "form-action 'self'; base-uri 'none'; frame-ancestors 'none'")

web = Blueprint("web", __name__, static_folder="static", static_url_path="/assets", template_folder="templates")


@web.record_once
def _configure(state: BlueprintSetupState) -> None:
    app = state.app
    settings = app_context(app).settings
    app.secret_key = data_key(settings.store.data_dir, SESSION_KEY_FILE)
    app.config.update(SESSION_COOKIE_NAME="decode_session", SESSION_COOKIE_HTTPONLY=True,
                      SESSION_COOKIE_SAMESITE="Lax", SESSION_COOKIE_SECURE=_https(settings.web.public_url),
                      PERMANENT_SESSION_LIFETIME=timedelta(hours=SESSION_HOURS))


def _https(public_url: str | None) -> bool:
    return bool(public_url and public_url.startswith("https://"))


def secure(response: Response) -> Response:
    """The headers every web page gets (https://owasp.org/www-project-secure-headers/)."""
    headers = response.headers
    headers.setdefault("Content-Security-Policy", CSP)
    headers.setdefault("X-Content-Type-Options", "nosniff")
    headers.setdefault("X-Frame-Options", "DENY")
    headers.setdefault("Referrer-Policy", "no-referrer")
    headers.setdefault("Cross-Origin-Opener-Policy", "same-origin")
    headers.setdefault("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
    headers.setdefault("Cache-Control", "no-store")
    if _https(app_context().settings.web.public_url):
        headers.setdefault("Strict-Transport-Security", "max-age=31536000")
    return response


web.after_request(secure)


@web.app_template_filter("duration")
def duration(seconds: float) -> str:
    """`seconds` as 42s, 3m 05s or 1h 02m."""
    if seconds < 60:
        return f"{seconds:.0f}s"
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes}m {secs:02d}s" if minutes < 60 else f"{minutes // 60}h {minutes % 60:02d}m"
