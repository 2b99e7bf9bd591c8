"""Credentials for GitHub: a GitHub App installation, or a plain token.

App mode signs a JWT with the app's private key (PyGithub's `AppAuth`, which
uses PyJWT: RS256, iat 60 s in the past, exp 5 min ahead) and exchanges it for
an installation token scoped to the one repository of the job
(https://docs.github.com/en/rest/apps/apps#create-an-installation-access-token-for-an-app).
Tokens are cached until five minutes before they expire. Token mode
(`GITHUB_TOKEN`, e.g. Actions) uses the token as it is.

`check()` asks GitHub once whether the credentials work (`GET /app` with the
JWT, or `GET /user` with the token), so a server can refuse to start, and
/healthz can answer 503, instead of every job failing later.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Protocol, TypeVar

import requests
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from github import Auth, Github, GithubException, GithubIntegration

from bot.config import GitHubSettings
from bot.core.errors import ConfigError, DecodeError
from bot.github.retry import GitHubRetry

REFRESH_MARGIN = timedelta(minutes=5)
T = TypeVar("T")


class Credentials(Protocol):
    """Where GitHub tokens come from."""

    api_url: str

    def token_for(self, repo: str) -> str:
        """A token that may act on `repo` ("owner/name")."""
        ...

    def bot_login(self) -> str | None:
        """The login our own comments appear under, when it can be known."""
        ...

    def check(self) -> None:
        """One cheap call, no retries: a ConfigError when GitHub refuses the credentials, a
        DecodeError when it cannot be asked."""
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

    def check(self) -> None:
        """`GET /user`: 401 means the token is bad; an installation token's 403 means it is good."""
        gh = Github(auth=Auth.Token(self.token), base_url=self.api_url, retry=None, timeout=10)
        try:
            _ask(self.api_url, "GET /user", lambda: gh.get_user().login, "GITHUB_TOKEN")
        except ConfigError as e:
            if e.status != 403:
                raise


class AppCredentials:
    """GitHub App mode: installation tokens minted per repository and cached."""

    def __init__(self, app_id: str, private_key: str, api_url: str, retry: GitHubRetry | None = None) -> None:
        self.api_url = api_url
        self._retry = retry or GitHubRetry()
        self._integration = GithubIntegration(auth=Auth.AppAuth(app_id, private_key), base_url=api_url, retry=None)
        self._tokens: dict[str, tuple[str, datetime]] = {}
        self._locks: dict[str, threading.Lock] = {}  # one per repository: a slow mint holds only its own
        self._lock = threading.Lock()  # guards `_locks` and `minted`
        self._slug: str | None = None
        self.minted = 0

    def token_for(self, repo: str) -> str:
        """A token for `repo`, cached until `REFRESH_MARGIN` before it expires. Minted under the repository's own
        lock: the workers of one repository mint once between them, and a mint that GitHub is slow to answer (its
        retries can take minutes) keeps no other repository's job waiting."""
        with self._lock:
            lock = self._locks.setdefault(repo, threading.Lock())
        with lock:
            cached = self._tokens.get(repo)
            if cached and cached[1] - REFRESH_MARGIN > datetime.now(timezone.utc):
                return cached[0]
            token, expires = self._retry.call(lambda: self._mint(repo))
            self._tokens[repo] = (token, expires)
            with self._lock:
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

    def as_app(self, method: str, path: str, parameters: dict[str, Any] | None = None) -> tuple[dict[str, Any], Any]:
        """(headers, JSON) of one request made as the App itself (its JWT), under the retry policy: for the
        App's own endpoints, such as its webhook's deliveries (bot/github/redeliver.py)."""
        return self._retry.call(lambda: self._integration.requester.requestJsonAndCheck(method, path, parameters))

    def bot_login(self) -> str | None:
        if self._slug is None:
            self._slug = self._retry.call(lambda: self._integration.get_app().slug)
        return f"{self._slug}[bot]"

    def check(self) -> None:
        """`GET /app` with a fresh JWT (https://docs.github.com/en/rest/apps/apps#get-the-authenticated-app)."""
        self._slug = _ask(self.api_url, "GET /app", lambda: self._integration.get_app().slug,
                          "GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY (a key deleted on the App's settings page is refused)")


def _ask(api_url: str, call: str, fn: Callable[[], T], what: str) -> T:
    """`fn()`, with GitHub's refusal as a ConfigError naming `what` to check, and no answer as a DecodeError.

    A 5xx or a lost connection is asked again, briefly (3 attempts): one bad gateway must not stop
    `decode serve` at start-up nor fail /healthz."""
    try:
        return GitHubRetry(attempts=3).call(fn)
    except GithubException as e:
        message = e.data.get("message") if isinstance(e.data, dict) else None
        reason = f"{call} answered {e.status}" + (f" ({' '.join(str(message).split())})" if message else "")
        if e.status in (401, 403, 404):
            raise ConfigError(f"GitHub refused the credentials: {reason}: check {what}", status=e.status) from None
        raise DecodeError(f"GitHub could not check the credentials: {reason}", status=e.status) from None
    except requests.RequestException as e:
        raise DecodeError(f"cannot reach GitHub at {api_url} ({call}: {type(e).__name__}): "
                          "check GITHUB_API_URL and the network") from None


def check_app_key(pem: str, name: str = "GITHUB_APP_PRIVATE_KEY") -> None:
    """A ConfigError unless `pem` loads as an unencrypted RSA private key, which GitHub App keys are
    (https://docs.github.com/en/apps/creating-github-apps/authenticating-with-a-github-app/managing-private-keys-for-github-apps)."""
    try:
        key = load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError):
        key = None
    if not isinstance(key, rsa.RSAPrivateKey):
        raise ConfigError(f"{name} does not load as an RSA private key: set it to the .pem file the App's "
                          "settings page generates, whole and unencrypted")


def credentials_from(github: GitHubSettings) -> Credentials:
    """App credentials when GITHUB_APP_ID is set, else the token; an error naming what is missing."""
    if github.app_id:
        if not github.app_private_key:
            raise ConfigError("GITHUB_APP_PRIVATE_KEY is not set: set it to the app's PEM private key "
                              "(or GITHUB_APP_PRIVATE_KEY_PATH to its file)")
        check_app_key(github.app_private_key, "GITHUB_APP_PRIVATE_KEY" + (
            " (or the file GITHUB_APP_PRIVATE_KEY_PATH names)" if github.app_private_key_path else ""))
        return AppCredentials(github.app_id, github.app_private_key, github.api_url)
    if github.token:
        return TokenCredentials(github.token, github.api_url)
    raise ConfigError("GITHUB_TOKEN is not set: set it to a token with contents, issues and pull requests "
                      "write access (or GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY for a GitHub App)")


def client(credentials: Credentials, repo: str) -> Github:
    """A PyGithub client for `repo` with PyGithub's own retries and pacing off: `GitHubRetry` is the retry
    policy and `WritePacer` the pacing (bot/github/pacing.py), since PyGithub's one write a second per client
    made a 300-file commit take 300 s while many jobs' clients together still wrote too fast."""
    return Github(auth=Auth.Token(credentials.token_for(repo)), base_url=credentials.api_url, retry=None, lazy=True,
                  seconds_between_requests=None, seconds_between_writes=None)
