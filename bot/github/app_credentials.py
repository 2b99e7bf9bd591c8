"""The GitHub App that `/setup` created, kept in `DECODE_DATA_DIR/app.json`.

The manifest flow (docs/setup.md) hands back the App's id, slug, private key,
webhook secret and OAuth client; `save` writes them owner-only (0600) and
atomically, so a crash never leaves half a key. At start-up `with_stored_app`
fills the GitHub settings from the file unless the environment sets App credentials:
the environment always wins, and is never mixed with the file.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from bot.config import GitHubSettings
from bot.core.errors import ConfigError
from bot.core.files import write_atomic

FILE = "app.json"


@dataclass(frozen=True)
class StoredApp:
    """What `POST /app-manifests/{code}/conversions` answers that decode-bot keeps; secrets stay out of repr."""

    id: int
    slug: str
    html_url: str
    client_id: str
    pem: str = field(repr=False)
    webhook_secret: str = field(repr=False)
    client_secret: str = field(repr=False)

    @classmethod
    def of(cls, data: object) -> "StoredApp":
        """The App in `data` (GitHub's answer, or the file); a ValueError naming the first missing field."""
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        values: dict[str, Any] = {}
        for f in fields(cls):
            value = data.get(f.name)
            kind = int if f.name == "id" else str
            if not isinstance(value, kind) or isinstance(value, bool) or value == "":
                raise ValueError(f"'{f.name}' is missing or not a {kind.__name__}")
            values[f.name] = value
        return cls(**values)

    @property
    def install_url(self) -> str:
        """Where the owner installs the App on accounts and repositories."""
        return f"{self.html_url}/installations/new"


def path_in(data_dir: Path) -> Path:
    """Where the App is kept."""
    return data_dir / FILE


def save(data_dir: Path, app: StoredApp) -> Path:
    """Write `app` to `data_dir/app.json`, mode 0600, atomically (a temporary file renamed over it)."""
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    return write_atomic(path_in(data_dir), json.dumps(asdict(app), indent=2))


def load(data_dir: Path) -> StoredApp | None:
    """The App kept in `data_dir`, None when there is none; a ConfigError when the file is damaged."""
    path = path_in(data_dir)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read it ({e.strerror}): make it readable by this user") from None
    try:
        return StoredApp.of(json.loads(text))
    except ValueError as e:
        raise ConfigError(f"{path} is not a GitHub App saved by /setup ({e}): set GITHUB_APP_ID, "
                          "GITHUB_APP_PRIVATE_KEY and GITHUB_WEBHOOK_SECRET, or delete the file and open /setup "
                          "again") from None


def applied(github: GitHubSettings, app: StoredApp) -> GitHubSettings:
    """`github` running as `app`; an OAuth client the environment sets is kept as a pair."""
    client = (github.client_id, github.client_secret) if github.client_id or github.client_secret else \
        (app.client_id, app.client_secret)
    return replace(github, app_id=str(app.id), app_private_key=app.pem, webhook_secret=app.webhook_secret,
                   client_id=client[0], client_secret=client[1])


def with_stored_app(github: GitHubSettings, data_dir: Path) -> GitHubSettings:
    """The GitHub settings `decode serve` and `decode worker` run with: the environment's when it sets any App
    credential (even partly: its own errors then say what is missing), else the App in `data_dir`'s app.json,
    if any."""
    if github.sets_app:
        return github
    app = load(data_dir)
    return github if app is None else applied(github, app)
