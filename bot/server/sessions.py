"""Signed-in users, one small file each under DECODE_DATA_DIR/sessions, keyed by a random session id.

The cookie (Flask's signed session) carries only the id; the login and the repositories the user
may read stay on the server, so a user with many repositories does not outgrow a cookie, and
signing out deletes the file: a copied cookie is dead from then on. Files are named by the id's
SHA-256, so listing the directory gives no usable id. A session ends after `web.SESSION_HOURS`;
the user's access is read from GitHub again at the next sign-in.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from bot.core.files import write_atomic

DIRECTORY = "sessions"


@dataclass(frozen=True)
class User:
    """A signed-in GitHub user and the repositories ("owner/name", lower case) they may read."""

    login: str
    repos: frozenset[str]
    expires_at: float

    def may_read(self, repo: str) -> bool:
        return repo.lower() in self.repos


class Sessions:
    """The session files under `data_dir/sessions`."""

    def __init__(self, data_dir: Path) -> None:
        self.directory = Path(data_dir) / DIRECTORY

    def create(self, login: str, repos: set[str], lifetime_s: float) -> str:
        """Store a new session for `login`; returns its id (for the cookie)."""
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        sid = secrets.token_urlsafe(32)
        record = {"login": login, "repos": sorted(r.lower() for r in repos), "expires_at": time.time() + lifetime_s}
        write_atomic(self._path(sid), json.dumps(record))
        self._prune(lifetime_s)
        return sid

    def user(self, sid: object) -> User | None:
        """The user of session `sid`, or None when it is unknown, expired (then deleted) or unreadable."""
        if not isinstance(sid, str) or not sid:
            return None
        try:
            record = json.loads(self._path(sid).read_text())
            user = User(str(record["login"]), frozenset(record["repos"]), float(record["expires_at"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if user.expires_at <= time.time():
            self.delete(sid)
            return None
        return user

    def delete(self, sid: object) -> None:
        """End session `sid` (signing out)."""
        if isinstance(sid, str) and sid:
            self._path(sid).unlink(missing_ok=True)

    def _prune(self, lifetime_s: float) -> None:
        cutoff = time.time() - lifetime_s
        for path in self.directory.glob("*.json"):
            try:
                if path.stat().st_mtime < cutoff:
                    path.unlink()
            except OSError:
                continue

    def _path(self, sid: str) -> Path:
        return self.directory / (hashlib.sha256(sid.encode()).hexdigest() + ".json")
