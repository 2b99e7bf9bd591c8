"""The GitHub calls of signing in, as the App's user (user-to-server): code -> token -> login and repositories.

The web application flow of a GitHub App:
https://docs.github.com/en/apps/creating-github-apps/authenticating-with-a-github-app/generating-a-user-access-token-for-a-github-app
The repositories a user may read are those of the App's installations the user can reach, each
listed with the user's token (`GET /user/installations`, then
`GET /user/installations/{id}/repositories`: the repositories the user has explicit read, write
or admin permission on, https://docs.github.com/en/rest/apps/installations). The token is used
for these calls only and never stored.
"""

from __future__ import annotations

from urllib.parse import urlencode

import requests

from bot.config import GitHubSettings
from bot.core.errors import DecodeError

TIMEOUT_S = 15
PER_PAGE = 100
MAX_PAGES = 20  # 2,000 installations or repositories per installation: more is not a dashboard's job
API_HEADERS = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}


class SignInError(DecodeError):
    """Signing in failed; the message says why and what to do, and holds no secret."""


def authorize_url(github: GitHubSettings, redirect_uri: str, state: str) -> str:
    """Where to send the browser to ask GitHub who the user is."""
    query = urlencode({"client_id": github.client_id, "redirect_uri": redirect_uri, "state": state})
    return f"{github.web_url}/login/oauth/authorize?{query}"


def exchange_code(github: GitHubSettings, code: str, redirect_uri: str) -> str:
    """The user access token for the `code` GitHub sent back."""
    try:
        response = requests.post(f"{github.web_url}/login/oauth/access_token", timeout=TIMEOUT_S,
                                 headers={"Accept": "application/json"},
                                 data={"client_id": github.client_id,
                                       "client_secret": github.client_secret,
                                       "code": code, "redirect_uri": redirect_uri})
        answer = response.json()
    except (requests.RequestException, ValueError) as e:
        raise SignInError(f"GitHub did not answer the sign-in ({type(e).__name__}): try again") from None
    if not isinstance(answer, dict) or not answer.get("access_token"):
        error = answer.get("error") if isinstance(answer, dict) else None
        if error == "incorrect_client_credentials":
            raise SignInError("GitHub refused the App's OAuth client: check GITHUB_CLIENT_ID and "
                              "GITHUB_CLIENT_SECRET (the App's settings page, 'Client secrets')")
        raise SignInError(f"GitHub refused the sign-in code ({error or response.status_code}): sign in again")
    return str(answer["access_token"])


def login_of(github: GitHubSettings, token: str) -> str:
    """The login of the token's user."""
    return str(_get(github, token, "/user")["login"])


def readable_repos(github: GitHubSettings, token: str) -> set[str]:
    """Every repository ("owner/name", lower case) of the App's installations the user may read."""
    repos: set[str] = set()
    for installation in _pages(github, token, "/user/installations", "installations"):
        path = f"/user/installations/{int(installation['id'])}/repositories"
        repos |= {str(r["full_name"]).lower() for r in _pages(github, token, path, "repositories")}
    return repos


def _pages(github: GitHubSettings, token: str, path: str, key: str) -> list[dict]:
    items: list[dict] = []
    for page in range(1, MAX_PAGES + 1):
        batch = _get(github, token, f"{path}?per_page={PER_PAGE}&page={page}").get(key) or []
        items += batch
        if len(batch) < PER_PAGE:
            break
    return items


def _get(github: GitHubSettings, token: str, path: str) -> dict:
    try:
        response = requests.get(github.api_url + path, timeout=TIMEOUT_S,
                                headers={**API_HEADERS, "Authorization": f"Bearer {token}"})
    except requests.RequestException as e:
        raise SignInError(f"GitHub did not answer GET {path.split('?')[0]} ({type(e).__name__}): try again") from None
    if response.status_code != 200:
        raise SignInError(f"GitHub answered {response.status_code} to GET {path.split('?')[0]}: sign in again; "
                          "if it persists, check the App's permissions and GITHUB_API_URL")
    body = response.json()
    if not isinstance(body, dict):
        raise SignInError(f"GitHub's answer to GET {path.split('?')[0]} is not an object: check GITHUB_API_URL")
    return body
