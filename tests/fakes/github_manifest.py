"""The GitHub App manifest flow on the fake GitHub: the web page a manifest is POSTed to, and the conversion.

https://docs.github.com/en/apps/sharing-github-apps/registering-a-github-app-from-a-manifest:
`POST /settings/apps/new?state=S` (or `/organizations/ORG/settings/apps/new`) with a
form field `manifest` registers the App and redirects to the manifest's `redirect_url`
with `code` and `state`; `POST /app-manifests/{code}/conversions`, unauthenticated,
once and within an hour, answers the App with its `pem`, `webhook_secret` and OAuth
client. The fake then authenticates as that App (JWTs signed with the new key), as
GitHub would once the App is installed. The fake GitHub asks `web` about requests
outside `/api/v3` and `anonymous` about REST requests before its authenticated routes.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlencode

from tests.fakes.github_auth import GitHubApp
from tests.fakes.github_rest import Result, node_id, now_iso, render_user

if TYPE_CHECKING:
    from tests.fakes.github import FakeGitHub, Request

NEW_APP = re.compile(r"^(?:/organizations/(?P<org>[^/]+))?/settings/apps/new$")
CONVERSION = re.compile(r"^/app-manifests/(?P<code>[^/]+)/conversions$")
CODE_LIFETIME = 3600
MANIFEST_KEYS = {"name", "url", "hook_attributes", "redirect_url", "callback_urls", "setup_url", "description",
                 "public", "default_events", "default_permissions", "request_oauth_on_install", "setup_on_update"}
ACCESS = {"read", "write", "admin"}


def web(fake: FakeGitHub, request: Request) -> tuple[int, dict, Any] | None:
    """The answer to a manifest form POST (a redirect back with `code` and `state`), else None."""
    match = NEW_APP.match(request.path)
    if match is None or request.method != "POST":
        return None
    form = parse_qs(request.body if isinstance(request.body, str) else "")
    try:
        manifest = json.loads(form["manifest"][0])
        problem = manifest_problem(manifest)
    except (KeyError, ValueError):
        problem = "the form has no manifest field holding JSON"
    if problem:
        return 422, {}, {"message": f"Invalid GitHub App manifest: {problem}"}
    code = secrets.token_hex(10)
    state = request.query.get("state")
    with fake.lock:
        fake.manifests.append({"owner": match.group("org"), "state": state, "manifest": manifest, "code": code,
                               "expires": time.time() + CODE_LIFETIME})
    query = {"code": code, **({"state": state} if state is not None else {})}
    return 302, {"location": f"{manifest['redirect_url']}?{urlencode(query)}"}, None


def manifest_problem(manifest: Any) -> str | None:
    """What GitHub would refuse in `manifest`, or None."""
    if not isinstance(manifest, dict):
        return "not a JSON object"
    if unknown := set(manifest) - MANIFEST_KEYS:
        return f"unknown keys {sorted(unknown)}"
    if not isinstance(manifest.get("url"), str) or not isinstance(manifest.get("redirect_url"), str):
        return "url and redirect_url are required"
    hook = manifest.get("hook_attributes", {})
    if not isinstance(hook, dict) or not isinstance(hook.get("url", ""), str):
        return "hook_attributes.url must be a URL"
    permissions = manifest.get("default_permissions", {})
    if not isinstance(permissions, dict) or not set(permissions.values()) <= ACCESS:
        return "default_permissions must map permission names to read or write"
    if not all(isinstance(e, str) for e in manifest.get("default_events", [])):
        return "default_events must be a list of event names"
    return None


def anonymous(fake: FakeGitHub, request: Request) -> Result | None:
    """`POST /app-manifests/{code}/conversions`: the App, once per code; else None (an authenticated route)."""
    match = CONVERSION.match(request.path)
    if match is None or request.method != "POST":
        return None
    with fake.lock:
        found = next((m for m in fake.manifests if m["code"] == match.group("code")), None)
        if found is None or found.get("converted") or found["expires"] < time.time():
            return 404, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest/apps/apps"
                         "#create-a-github-app-from-a-manifest"}, {}
        found["converted"] = True
        return 201, create_app(fake, found["manifest"], found["owner"]), {}


def create_app(fake: FakeGitHub, manifest: dict, owner: str | None) -> dict:
    """Register the App: the fake authenticates it from now on; returns the conversion's answer."""
    name = manifest.get("name") or "decode-bot"
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    app = GitHubApp(fake.next_id(), slug)
    fake.app = app
    fake.add_user(app.bot_login, type="Bot")
    fake.created_apps.append({"id": app.app_id, "slug": slug, "owner": owner})
    account = owner or "octocat"
    fake.add_user(account, type="Organization" if owner else "User")
    now = now_iso()
    return {
        "id": app.app_id, "slug": slug, "node_id": node_id("App", app.app_id), "name": name,
        "owner": render_user(fake, account), "description": manifest.get("description", ""),
        "external_url": manifest["url"], "html_url": f"{fake.web_url}/apps/{slug}",
        "created_at": now, "updated_at": now,
        "permissions": {"metadata": "read", **manifest.get("default_permissions", {})},
        "events": manifest.get("default_events", []),
        "client_id": "Iv23" + secrets.token_hex(8), "client_secret": secrets.token_hex(20),
        "webhook_secret": secrets.token_hex(20), "pem": app.private_key_pem,
    }
