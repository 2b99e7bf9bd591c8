"""The GitHub App manifest decode-bot registers itself with, and the conversion of GitHub's code.

The flow (https://docs.github.com/en/apps/sharing-github-apps/registering-a-github-app-from-a-manifest):
a form POSTs `manifest` to `/settings/apps/new?state=...` (or an organization's), GitHub
creates the App and redirects to `redirect_url?code=...&state=...`, and
`POST /app-manifests/{code}/conversions` (no authentication, within an hour) answers
the App's id, key, webhook secret and OAuth client. The permissions and events are
the least the code needs; docs/setup.md says why for each.
"""

from __future__ import annotations

import re

import requests

from bot.github.app_credentials import StoredApp
from bot.config import Settings
from bot.core.errors import DecodeError
from bot.github.triggers import APP_ROUTES

# Repository permissions (https://docs.github.com/en/rest/authentication/permissions-required-for-github-apps).
PERMISSIONS = {
    "contents": "write",  # clone private repositories, read .github/decode.yml, push the run's branch
    "issues": "write",  # read the issue, the 👀 reaction and the tracking comment
    "pull_requests": "write",  # open or update the PR, read a PR and its review comments, react and reply
    "metadata": "read",  # mandatory with any repository permission; also the sender's permission check
    "actions": "read",  # the failing Actions jobs' logs, for a CI fix (ci_fix in decode.yml)
    "checks": "write",  # each run's decode-bot check run; the failing checks, for a CI fix
}
# The webhook events the App can subscribe to that the router has routes for, each with the permission
# GitHub requires for it (https://docs.github.com/en/webhooks/webhook-events-and-payloads).
SUBSCRIBABLE = {
    "issues": "issues",
    "issue_comment": "issues",
    "pull_request_review_comment": "pull_requests",
    "pull_request_review": "pull_requests",
    "check_suite": "checks",
    "check_run": "checks",  # "Re-run" on a decode-bot check run
}
ORG = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,37}[A-Za-z0-9])?")  # a GitHub login
CODE = re.compile(r"[A-Za-z0-9_-]{1,200}")
NAME = "decode-bot"
SIGN_IN_CALLBACK = "/login/callback"  # the dashboard's GitHub sign-in (bot/server/oauth.py): the App's Callback URL


class SetupError(DecodeError):
    """The App could not be created; the message says what to do and holds no secret."""


def events() -> list[str]:
    """The events the router acts on that an App subscribes to (`workflow_dispatch` is the Action's)."""
    return sorted({key.split(".")[0] for key in APP_ROUTES} & SUBSCRIBABLE.keys())


def permissions() -> dict[str, str]:
    """PERMISSIONS, plus read access for an event's permission that PERMISSIONS lacks."""
    needed = dict(PERMISSIONS)
    for event in events():
        needed.setdefault(SUBSCRIBABLE[event], "read")
    return needed


def manifest(settings: Settings) -> dict[str, object] | None:
    """The manifest for this server, None without DECODE_PUBLIC_URL (GitHub needs somewhere to send
    deliveries and people back to)."""
    base = settings.web.public_url
    if not base:
        return None
    return {
        "name": NAME,
        "url": base,
        "description": "Turns issues into pull requests written by a sandboxed coding agent.",
        "hook_attributes": {"url": f"{base}/webhook", "active": True},
        "redirect_url": f"{base}/setup/callback",
        "callback_urls": [f"{base}{SIGN_IN_CALLBACK}"],
        "public": False,
        "default_permissions": permissions(),
        "default_events": events(),
    }


def new_app_url(settings: Settings, state: str, org: str = "") -> str:
    """Where the form POSTs the manifest: the personal account's new-App page, or `org`'s."""
    owner = f"/organizations/{org}" if org else ""
    return f"{settings.github.web_url}{owner}/settings/apps/new?state={state}"


def convert(settings: Settings, code: str) -> StoredApp:
    """The App GitHub created, from the code it redirected back with; a SetupError saying what went wrong."""
    if not CODE.fullmatch(code):
        raise SetupError("GitHub's code is missing or malformed: start again at /setup")
    url = f"{settings.github.api_url}/app-manifests/{code}/conversions"
    try:
        answer = requests.post(url, timeout=30, headers={"Accept": "application/vnd.github+json",
                                                         "X-GitHub-Api-Version": "2022-11-28"})
    except requests.RequestException as e:
        raise SetupError(f"cannot reach GitHub at {settings.github.api_url} ({type(e).__name__}): check "
                         "GITHUB_API_URL and the network, then start again at /setup") from None
    if answer.status_code != 201:
        raise SetupError(f"GitHub did not hand the new App over (POST /app-manifests/{{code}}/conversions "
                         f"answered {answer.status_code}{_message(answer)}): a code works once and for one hour; "
                         "start again at /setup", status=answer.status_code)
    try:
        return StoredApp.of(answer.json())
    except ValueError as e:
        raise SetupError(f"GitHub's answer to the conversion is not an App ({e}): start again at /setup") from None


def _message(answer: requests.Response) -> str:
    try:
        message = answer.json().get("message")
    except (ValueError, AttributeError):
        return ""
    return f": {' '.join(str(message).split())[:200]}" if message else ""
