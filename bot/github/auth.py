"""Credentials for GitHub: a GitHub App installation, or a plain token.

App mode signs a JWT with the app's private key (PyGithub's `AppAuth`, which
uses PyJWT: RS256, iat 60 s in the past, exp 5 min ahead) and exchanges it for
an installation token scoped to the one repository of the job
(https://docs.github.com/en/rest/apps/apps#create-an-installation-access-token-for-an-app).
Tokens are cached until five minutes before they expire. Token mode
(`GITHUB_TOKEN`, e.g. Actions) uses the token as it is.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Protocol

from github import Auth, Github, GithubException, GithubIntegration

from bot.config import Settings
from bot.errors import ConfigError
from bot.github.retry import GitHubRetry

REFRESH_MARGIN = timedelta(minutes=5)


class Credentials(Protocol):
    """Where GitHub tokens come from."""

    api_url: str

    def token_for(self, repo: str) -> str:
        """A token that may act on `repo` ("owner/name")."""
        ...

    def bot_login(self) -> str | None:
        """The login our own comments appear under, when it can be known."""
        ...


ACTIONS_LOGIN = "github-actions[bot]"


@dataclass
class TokenCredentials:
    """Token mode: one token for everything."""

    token: str
    api_url: str
    login: str | None = None

    def token_for(self, repo: str) -> str:
        return self.token

    def bot_login(self) -> str | None:
        """The token's user (`GET /user`), looked up once. An installation token, such as Actions'
        GITHUB_TOKEN, may not read `/user` (403): its comments appear as github-actions[bot]
        (https://docs.github.com/en/actions/security-for-github-actions/security-guides/automatic-token-authentication)."""
        if self.login is None:
            gh = Github(auth=Auth.Token(self.token), base_url=self.api_url, retry=None)
            try:
                self.login = GitHubRetry().call(lambda: gh.get_user().login)
            except GithubException as e:
                if e.status != 403:
                    raise
                self.login = ACTIONS_LOGIN
        return self.login


class AppCredentials:
    """GitHub App mode: installation tokens minted per repository and cached."""

    def __init__(self, app_id: str, private_key: str, api_url: str, retry: GitHubRetry | None = None) -> None:
        self.api_url = api_url
        self._retry = retry or GitHubRetry()
        self._integration = GithubIntegration(auth=Auth.AppAuth(app_id, private_key), base_url=api_url, retry=None)
        self._tokens: dict[str, tuple[str, datetime]] = {}
        self._lock = threading.Lock()
        self._slug: str | None = None
        self.minted = 0

    def token_for(self, repo: str) -> str:
        with self._lock:
            cached = self._tokens.get(repo)
            if cached and cached[1] - REFRESH_MARGIN > datetime.now(timezone.utc):
                return cached[0]
            token, expires = self._retry.call(lambda: self._mint(repo))
            self._tokens[repo] = (token, expires)
            self.minted += 1
            return token

    def _mint(self, repo: str) -> tuple[str, datetime]:
        owner, name = repo.split("/", 1)
        installation = self._integration.get_repo_installation(owner, name)
        _, data = self._integration.requester.requestJsonAndCheck(
            "POST", f"/app/installations/{installation.id}/access_tokens", input={"repositories": [name]},
        )
        expires = datetime.fromisoformat(data["expires_at"].replace("Z", "+00:00"))
        return data["token"], expires

    def bot_login(self) -> str | None:
        if self._slug is None:
            self._slug = self._retry.call(lambda: self._integration.get_app().slug)
        return f"{self._slug}[bot]"


def credentials_from(settings: Settings) -> Credentials:
    """App credentials when GITHUB_APP_ID is set, else the token; an error naming what is missing."""
    if settings.github_app_id:
        if not settings.github_app_private_key:
            raise ConfigError("GITHUB_APP_PRIVATE_KEY is not set: set it to the app's PEM private key "
                              "(or GITHUB_APP_PRIVATE_KEY_PATH to its file)")
        return AppCredentials(settings.github_app_id, settings.github_app_private_key, settings.github_api_url)
    if settings.github_token:
        return TokenCredentials(settings.github_token, settings.github_api_url)
    raise ConfigError("GITHUB_TOKEN is not set: set it to a token with contents, issues and pull requests "
                      "write access (or GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY for a GitHub App)")


def client(credentials: Credentials, repo: str, *, throttle: bool = True) -> Github:
    """A PyGithub client for `repo` with PyGithub's own retries off (GitHubRetry is the policy).

    `throttle` keeps PyGithub's pacing between writes, which GitHub recommends to
    stay clear of secondary rate limits.
    """
    pacing = {} if throttle else {"seconds_between_requests": None, "seconds_between_writes": None}
    return Github(auth=Auth.Token(credentials.token_for(repo)), base_url=credentials.api_url, retry=None, lazy=True,
                  **pacing)
