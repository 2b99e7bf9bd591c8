"""The fake GitHub's OAuth web flow for its App (user-to-server tokens), and what a user token lists.

Shaped after https://docs.github.com/en/apps/creating-github-apps/authenticating-with-a-github-app/generating-a-user-access-token-for-a-github-app:

- GET /login/oauth/authorize: GitHub's consent page. The browser here is already signed in to
  GitHub as `OAuthState.login` (set it with `sign_in_as`) and has authorized the App before, so
  GitHub redirects straight back to `redirect_uri?code=...&state=...`.
- POST /login/oauth/access_token: a code (single use, 10 minutes) for a `ghu_` token; a refusal is
  a 200 with `error`, as GitHub answers it.

And the REST endpoints of https://docs.github.com/en/rest/apps/installations for a user token:
GET /user/installations and GET /user/installations/{id}/repositories (the repositories the user
has explicit permission on: owned, or a role other than none; public ones are not implied).
"""

from __future__ import annotations

import html
import json
import secrets
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlencode

from tests.fakes.github_auth import ApiError, Token, new_token
from tests.fakes.github_rest import Result, need_token, not_found, paginate, render_installation, render_repo, route

if TYPE_CHECKING:
    from tests.fakes.github import FakeGitHub, Request

CODE_LIFETIME = 600
TOKEN_LIFETIME = 8 * 3600
NOT_A_USER_TOKEN = ("You must authenticate with an access token authorized to a GitHub App in order to list "
                    "installations")


@dataclass
class OAuthState:
    """The App's OAuth client, who is signed in to GitHub in the browser, and the codes and tokens issued."""

    client_id: str = "Iv23li0fakeclient01"
    client_secret: str = field(default_factory=lambda: secrets.token_hex(20))
    login: str | None = None
    codes: dict[str, tuple[str, str, float]] = field(default_factory=dict)  # code -> (login, redirect_uri, expiry)
    user_tokens: set[str] = field(default_factory=set)


def oauth_of(fake: FakeGitHub) -> OAuthState:
    """The fake's OAuth state, made on first use."""
    with fake.lock:
        if not isinstance(getattr(fake, "oauth", None), OAuthState):
            fake.oauth = OAuthState()  # type: ignore[attr-defined]
        return fake.oauth  # type: ignore[attr-defined]


def sign_in_as(fake: FakeGitHub, login: str) -> OAuthState:
    """From now on the browser is signed in to the fake GitHub as `login` (a user made if needed)."""
    fake.add_user(login)
    state = oauth_of(fake)
    state.login = login
    return state


def serve_web(fake: FakeGitHub, request: Request) -> tuple[int, dict, bytes] | None:
    """The answer to a web (non-API) OAuth request, or None when `request` is not one."""
    if request.kind != "other":
        return None
    if request.method == "GET" and request.path == "/login/oauth/authorize":
        return _authorize(fake, request)
    if request.method == "POST" and request.path == "/login/oauth/access_token":
        return _access_token(fake, request)
    return None


def _page(status: int, text: str) -> tuple[int, dict, bytes]:
    body = f"<!doctype html><title>GitHub</title><p>{html.escape(text)}</p>".encode()
    return status, {"content-type": "text/html; charset=utf-8"}, body


def _authorize(fake: FakeGitHub, request: Request) -> tuple[int, dict, bytes]:
    state, query = oauth_of(fake), request.query
    if query.get("client_id") != state.client_id:
        return _page(404, "Not Found")
    redirect_uri = query.get("redirect_uri", "")
    if not redirect_uri.startswith(("http://127.0.0.1:", "http://localhost/")):
        return _page(200, "The redirect_uri MUST match the registered callback URL for this application.")
    if state.login is None:
        return _page(200, "Sign in to GitHub to continue to the App.")
    code = secrets.token_hex(10)
    with fake.lock:
        state.codes[code] = (state.login, redirect_uri, time.time() + CODE_LIFETIME)
    back = {"code": code, **({"state": query["state"]} if "state" in query else {})}
    sep = "&" if "?" in redirect_uri else "?"
    return 302, {"location": f"{redirect_uri}{sep}{urlencode(back)}", "content-type": "text/html"}, b""


def _access_token(fake: FakeGitHub, request: Request) -> tuple[int, dict, bytes]:
    state = oauth_of(fake)
    body = request.body if isinstance(request.body, dict) else dict(parse_qsl(request.body or ""))
    params = {**request.query, **{k: str(v) for k, v in body.items()}}
    if params.get("client_id") != state.client_id or params.get("client_secret") != state.client_secret:
        answer = _error("incorrect_client_credentials", "The client_id and/or client_secret passed are incorrect.")
    else:
        with fake.lock:
            login, redirect_uri, expiry = state.codes.pop(params.get("code", ""), (None, "", 0.0))
        if login is None or expiry < time.time():
            answer = _error("bad_verification_code", "The code passed is incorrect or expired.")
        elif params.get("redirect_uri", redirect_uri) != redirect_uri:
            answer = _error("redirect_uri_mismatch", "The redirect_uri MUST match the registered callback URL "
                                                     "for this application.")
        else:
            value = new_token("ghu_")
            with fake.lock:
                fake.tokens[value] = Token(value, login, expires_at=time.time() + TOKEN_LIFETIME)
                state.user_tokens.add(value)
            answer = {"access_token": value, "expires_in": TOKEN_LIFETIME, "refresh_token": new_token("ghr_"),
                      "refresh_token_expires_in": 15897600, "scope": "", "token_type": "bearer"}
    if "application/json" in request.headers.get("accept", ""):
        return 200, {"content-type": "application/json; charset=utf-8"}, json.dumps(answer).encode()
    return 200, {"content-type": "application/x-www-form-urlencoded"}, urlencode(answer).encode()


def _error(code: str, description: str) -> dict:
    return {"error": code, "error_description": description,
            "error_uri": "https://docs.github.com/apps/managing-oauth-apps/troubleshooting-oauth-app-access-token-request-errors"}


def _user_token(fake: FakeGitHub, identity: object) -> Token:
    token = need_token(identity)
    if token.value not in oauth_of(fake).user_tokens:
        raise ApiError(403, NOT_A_USER_TOKEN)
    return token


def _readable(fake: FakeGitHub, login: str) -> list:
    return sorted((r for r in fake.repos.values() if r.owner == login or r.permissions.get(login, "none") != "none"),
                  key=lambda r: r.full_name.lower())


@route("GET", "/user/installations")
def list_user_installations(fake, request, identity) -> Result:
    token = _user_token(fake, identity)
    installations = [render_installation(fake)] if _readable(fake, token.login) else []
    return 200, {"total_count": len(installations), "installations": installations}, {}


@route("GET", r"/user/installations/(?P<iid>\d+)/repositories")
def list_user_installation_repos(fake, request, identity, iid) -> Result:
    token = _user_token(fake, identity)
    repos = _readable(fake, token.login)
    if int(iid) != fake.installation_id or not repos:
        raise not_found()
    status, page, headers = paginate(fake, request, [render_repo(fake, r) for r in repos])
    return status, {"total_count": len(repos), "repository_selection": "all", "repositories": page}, headers
