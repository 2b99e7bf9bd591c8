"""Credentials the fake GitHub accepts: plain tokens, GitHub App JWTs, installation tokens.

JWT rules follow https://docs.github.com/en/apps/creating-github-apps/authenticating-with-a-github-app/generating-a-json-web-token-jwt-for-a-github-app
(RS256, `iss` = the app id, `exp` no more than 10 minutes ahead); the error
texts are the ones GitHub answers with.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

CLOCK_SKEW = 60
MAX_JWT_LIFETIME = 600
TOKEN_LIFETIME = 3600


class ApiError(Exception):
    """An error answer: status, GitHub's message, optional `errors` list and extra headers."""

    def __init__(self, status: int, message: str, errors: list | None = None, headers: dict | None = None,
                 documentation_url: str = "https://docs.github.com/rest") -> None:
        super().__init__(message)
        self.status, self.message, self.errors, self.headers = status, message, errors, headers or {}
        self.documentation_url = documentation_url

    def payload(self) -> dict:
        body = {"message": self.message, "documentation_url": self.documentation_url, "status": str(self.status)}
        if self.errors is not None:
            body["errors"] = self.errors
        return body


def bad_credentials() -> ApiError:
    return ApiError(401, "Bad credentials")


@dataclass
class Token:
    """A token the fake accepts: whose it is, which repositories ("owner/name") it reaches, until when."""

    value: str
    login: str
    repositories: set[str] | None = None  # None: every repository the login can reach
    expires_at: float | None = None
    installation_id: int | None = None
    permissions: dict[str, str] = field(default_factory=dict)
    bot: bool = False  # a bot token (GITHUB_TOKEN, installation token) writes to every repository it reaches

    def reaches(self, full_name: str) -> bool:
        return self.repositories is None or full_name.lower() in {r.lower() for r in self.repositories}


@dataclass
class AppIdentity:
    """The authenticated GitHub App, from a verified JWT."""

    app_id: int
    claims: dict


class GitHubApp:
    """One GitHub App: its id, slug, key pair and the JWT check."""

    def __init__(self, app_id: int, slug: str = "decode-bot") -> None:
        self.app_id = app_id
        self.slug = slug
        self.replace_key()

    def replace_key(self) -> str:
        """Generate a new private key and delete the old one, as on the App's settings page
        (https://docs.github.com/en/apps/creating-github-apps/authenticating-with-a-github-app/managing-private-keys-for-github-apps):
        JWTs signed with the old key are refused from now on. Returns the new key's PEM."""
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.private_key_pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
        ).decode()
        self.public_key = key.public_key()
        return self.private_key_pem

    @property
    def bot_login(self) -> str:
        return f"{self.slug}[bot]"

    def verify(self, token: str, now: float | None = None) -> AppIdentity:
        """The app behind `token`, or the 401 GitHub answers for a bad JWT."""
        now = time.time() if now is None else now
        try:
            claims = jwt.decode(token, self.public_key, algorithms=["RS256"],
                                options={"verify_exp": False, "verify_iat": False, "verify_nbf": False})
        except jwt.PyJWTError as error:
            raise ApiError(401, "A JSON web token could not be decoded") from error
        iat, exp = claims.get("iat"), claims.get("exp")
        if not isinstance(iat, (int, float)) or iat > now + CLOCK_SKEW:
            raise ApiError(401, "'Issued at' claim ('iat') must be an Integer representing the time that the "
                                "assertion was issued.")
        if not isinstance(exp, (int, float)) or exp <= now or exp > now + MAX_JWT_LIFETIME:
            raise ApiError(401, "'Expiration time' claim ('exp') must be a numeric value representing the future "
                                "time at which the assertion expires.")
        if exp - iat > MAX_JWT_LIFETIME + CLOCK_SKEW:
            raise ApiError(401, "'Expiration time' claim ('exp') is too far in the future.")
        if str(claims.get("iss")) != str(self.app_id):
            raise ApiError(401, "'Issuer' claim ('iss') must be an Integer or String")
        return AppIdentity(self.app_id, claims)

    def sign(self, **claims: object) -> str:
        """A JWT signed with the app's key (tests use it to forge expired or odd tokens)."""
        now = int(time.time())
        payload = {"iat": now - 60, "exp": now + 300, "iss": str(self.app_id), **claims}
        return jwt.encode(payload, self.private_key_pem, algorithm="RS256")


def looks_like_jwt(value: str) -> bool:
    return value.count(".") == 2 and value.startswith("eyJ")


def new_token(prefix: str = "ghs_") -> str:
    return prefix + secrets.token_urlsafe(27).replace("-", "A").replace("_", "b")[:36]
