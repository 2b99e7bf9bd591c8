"""GET /setup and GET /setup/callback: create decode-bot's GitHub App in one click (docs/setup.md).

A server started without App credentials is in setup mode: /webhook answers 503,
and /setup, opened with the setup key `decode serve` logs at start-up, offers a form
that POSTs the manifest (bot/server/manifest.py) to GitHub. The callback checks the
single-use `state`, converts the code, keeps the App in app.json (0600) and switches
the running server over: `AppContext.settings` is replaced and `on_configured` (the
worker pool of `decode serve`) runs, without a restart. A configured server never
offers the form again, and never shows a secret.

The setup key is kept in DECODE_DATA_DIR/setup.key (owner-only, like the server's other keys,
bot/core/keys.py), so a restart on the same data dir (to set DECODE_PUBLIC_URL, say) keeps the
logged link good; it is deleted once the App is saved.
"""

from __future__ import annotations

import base64
import hmac
import ipaddress
import json
import logging
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from flask import Blueprint, Flask, Response, current_app, redirect, render_template_string, request
from flask.typing import ResponseReturnValue

from bot.github.app_credentials import StoredApp, applied, load, save
from bot.config import Settings
from bot.core.errors import DecodeError
from bot.core.keys import data_key
from bot.server.context import app_context
from bot.server.manifest import ORG, SetupError, convert, manifest, new_app_url

log = logging.getLogger("decode.setup")
setup = Blueprint("setup", __name__)
KEY = "decode.setup"
STATE_TTL_S = 3600.0  # GitHub's code lives an hour; a state need not outlive it
MAX_STATES = 64
KEY_FILE = "setup.key"


@dataclass
class SetupFlow:
    """The setup mode of one app: its key, the states it handed out, and what runs once configured."""

    on_configured: Callable[[Settings], None] | None = None
    key: str = ""  # "" (a configured server) admits no one
    lock: threading.Lock = field(default_factory=threading.Lock)
    states: dict[str, float] = field(default_factory=dict)  # state -> when it expires (monotonic)

    def admits(self, key: str | None) -> bool:
        """Whether `key` is this server's setup key."""
        return bool(key and self.key and hmac.compare_digest(key.encode(), self.key.encode()))

    def issue(self) -> str:
        """A new single-use state, good for an hour; the oldest are dropped past MAX_STATES."""
        state = secrets.token_urlsafe(24)
        now = time.monotonic()
        with self.lock:
            self.states = {s: t for s, t in self.states.items() if t > now}
            while len(self.states) >= MAX_STATES:
                self.states.pop(next(iter(self.states)))
            self.states[state] = now + STATE_TTL_S
        return state

    def take(self, state: str) -> bool:
        """Whether `state` was issued here and is still good; either way it cannot be used again."""
        expires = self.states.pop(state, None)
        return expires is not None and expires > time.monotonic()


def init_setup(app: Flask, on_configured: Callable[[Settings], None] | None = None) -> SetupFlow:
    """Register /setup on `app`; `on_configured(settings)` runs once the App exists (before /webhook
    accepts deliveries), e.g. to start the worker pool; an error it raises is shown on the page."""
    settings = app_context(app).settings
    flow = SetupFlow(on_configured, "" if settings.github.has_credentials else setup_key(settings.store.data_dir))
    app.extensions[KEY] = flow
    app.register_blueprint(setup)
    return flow


def setup_key(data_dir: Path) -> str:
    """The setup key of `data_dir`, made on first use and kept in `data_dir/setup.key` (0600)."""
    return base64.urlsafe_b64encode(data_key(data_dir, KEY_FILE)).decode().rstrip("=")


def address(host: str, port: int) -> str:
    """`host:port` as a URL's authority: an IPv6 address in brackets (RFC 3986's IP-literal)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def browser_url(host: str, port: int) -> str:
    """The URL a browser on this machine opens to reach a server listening on `host`: a wildcard bind
    (`0.0.0.0`, `::`, which no browser can open) is reached at its loopback address."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return f"http://{address(host, port)}"  # a name, as given
    loopback = "::1" if ip.version == 6 else "127.0.0.1"
    return f"http://{address(loopback if ip.is_unspecified else str(ip), port)}"


def announce(public_url: str | None, host: str, port: int, key: str) -> str:
    """The log line of a server starting in setup mode: what is missing and the link that creates the App
    (on `public_url`, DECODE_PUBLIC_URL, else on this machine, after saying to set DECODE_PUBLIC_URL first)."""
    said = (f"serving on {address(host, port)} in setup mode: no GitHub App yet (GITHUB_APP_ID, "
            "GITHUB_APP_PRIVATE_KEY and GITHUB_WEBHOOK_SECRET are not set, nor GITHUB_TOKEN), /webhook answers 503; ")
    if not public_url:
        said += ("DECODE_PUBLIC_URL is not set: set it to the https address GitHub reaches this server at "
                 "(the App's webhooks go there) and restart, then ")
    return said + f"open {public_url or browser_url(host, port)}/setup?key={key} to create it"


def flow_of(app: Flask | None = None) -> SetupFlow:
    """The setup flow of `app`, by default the app handling the current request."""
    flow: SetupFlow = (app or current_app).extensions[KEY]
    return flow


@setup.get("/setup")
def show() -> ResponseReturnValue:
    settings, flow = app_context().settings, flow_of()
    if settings.github.has_credentials:
        return page("configured", app=stored_app(settings), app_id=settings.github.app_id)
    if not settings.web.public_url:
        return page("no_public_url")
    key = request.args.get("key", "")
    if not flow.admits(key):
        return page("need_key"), 403
    org = request.args.get("org", "").strip()
    if org and not ORG.fullmatch(org):
        return page("form", key=key, org=org, error=f"{org!r} is not an organization name on GitHub"), 400
    return page("form", key=key, org=org, action=new_app_url(settings, flow.issue(), org),
                manifest=json.dumps(manifest(settings)), fields=manifest(settings))


@setup.get("/setup/callback")
def callback() -> ResponseReturnValue:
    ctx, flow = app_context(), flow_of()
    with flow.lock:  # one conversion at a time: a second callback finds the server configured
        if ctx.settings.github.has_credentials:
            return page("configured", app=stored_app(ctx.settings), app_id=ctx.settings.github.app_id), 409
        if not flow.take(request.args.get("state", "")):
            return page("error", error="this link did not come from this server's setup page, or it expired: "
                                       "start again at /setup"), 400
        try:
            app = convert(ctx.settings, request.args.get("code", ""))
        except SetupError as e:
            return page("error", error=str(e)), 502
        save(ctx.settings.store.data_dir, app)
        (ctx.settings.store.data_dir / KEY_FILE).unlink(missing_ok=True)  # its work is done
        flow.key = ""
        log.info("GitHub App %s (id %d) created and saved in %s", app.slug, app.id, ctx.settings.store.data_dir)
        configured = ctx.settings.replace(github=applied(ctx.settings.github, app))
        try:
            if flow.on_configured is not None:
                flow.on_configured(configured)
        except DecodeError as e:
            log.error("the App is saved but the server cannot run as it yet: %s", e)
            return page("error", error=f"the App {app.slug} is saved, but the server cannot run as it yet: {e}; "
                                       "fix that and restart decode serve"), 500
        ctx.settings = configured
    return redirect("/setup", 303)


def stored_app(settings: Settings) -> StoredApp | None:
    """The App in app.json when it is the one the server runs as (not the environment's)."""
    try:
        app = load(settings.store.data_dir)
    except DecodeError:
        return None
    return app if app is not None and str(app.id) == settings.github.app_id else None


def page(view: str, **values: object) -> Response:
    """One setup page, with a policy that allows no script and forms only to here and GitHub."""
    settings = app_context().settings
    nonce = secrets.token_urlsafe(16)
    html = render_template_string(PAGE, view=view, nonce=nonce, settings=settings, **values)
    targets = " ".join(dict.fromkeys(u for u in ("'self'", settings.github.web_url, settings.web.public_url) if u))
    response = Response(html, mimetype="text/html")
    response.headers["Content-Security-Policy"] = (
        f"default-src 'none'; style-src 'nonce-{nonce}'; img-src data:; form-action {targets}; "
        "base-uri 'none'; frame-ancestors 'none'")
    response.headers["Referrer-Policy"] = "no-referrer"  # the setup key is in this page's URL
    response.headers["Cache-Control"] = "no-store"
    return response


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>decode-bot setup</title>
<link rel="icon" href="data:,">
<style nonce="{{ nonce }}">
body { font: 16px/1.5 system-ui, sans-serif; max-width: 44rem; margin: 3rem auto; padding: 0 1rem; color: #1f2328; }
button { font: inherit; padding: .4rem 1rem; cursor: pointer; } code { background: #f6f8fa; padding: 0 .2rem; }
.error { color: #d1242f; } form { margin: 1rem 0; } input { font: inherit; padding: .3rem; }
</style></head><body>
<h1>decode-bot setup</h1>
{% if view == "configured" %}
  {% if app %}
  <p id="configured">This server runs as the GitHub App <a href="{{ app.html_url }}">{{ app.slug }}</a>
  (id {{ app.id }}).</p>
  <p><a id="install" href="{{ app.install_url }}">Install {{ app.slug }}</a> on the accounts and repositories
  it should work on.</p>
  {% else %}
  <p id="configured">This server runs as GitHub App id {{ app_id }}, set by its environment
  (<code>GITHUB_APP_ID</code>). Install it from the App's page on GitHub.</p>
  {% endif %}
{% elif view == "no_public_url" %}
  <p id="no-public-url">Set <code>DECODE_PUBLIC_URL</code> to the https address GitHub reaches this server at
  (for example <code>https://decode.example.com</code>) and restart <code>decode serve</code>: the App's webhook
  and the way back from GitHub are built from it. Then open the setup link <code>decode serve</code> logged
  again: it stays good across the restart.</p>
{% elif view == "need_key" %}
  <p id="need-key">Open the setup link <code>decode serve</code> printed in its log when it started
  (<code>/setup?key=...</code>): only whoever runs the server may choose its GitHub App.</p>
{% elif view == "error" %}
  <p class="error" id="error">{{ error }}</p>
{% else %}
  <p>GitHub creates the App from this server's manifest, asks you to confirm its name (App names are unique
  on GitHub), then brings you back here; the server then runs as the App, without a restart.</p>
  {% if error %}<p class="error" id="error">{{ error }}</p>{% endif %}
  <form method="get" action="/setup">
    <input type="hidden" name="key" value="{{ key }}">
    <label>Owner: an organization
    <input id="org" name="org" value="{{ org }}" placeholder="leave empty for your personal account"></label>
    <button id="owner" type="submit">Use this owner</button>
  </form>
  {% if action %}
  <form method="post" action="{{ action }}">
    <input type="hidden" name="manifest" value="{{ manifest }}">
    <button id="create" type="submit">Create the GitHub App {% if org %}for {{ org }}{% else %}on your
    account{% endif %}</button>
  </form>
  <p>It asks for these repository permissions: {% for name, access in fields.default_permissions.items() %}
  <code>{{ name }}: {{ access }}</code>{{ "," if not loop.last }}{% endfor %}; and these events:
  {% for event in fields.default_events %}<code>{{ event }}</code>{{ "," if not loop.last }}{% endfor %}.
  Deliveries go to <code>{{ fields.hook_attributes.url }}</code>.</p>
  {% endif %}
{% endif %}
</body></html>
"""
