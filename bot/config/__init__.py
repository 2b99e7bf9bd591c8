"""Settings read once from the environment and passed down as a value.

Nothing reads `os.environ` after start-up: a job gets its `Settings`, so one
repository's configuration can never leak into another's job. A missing or
malformed variable is a `ConfigError` naming the variable and what it should hold.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from bot.core.errors import ConfigError
from bot.core.redact import Redactor
from bot.sandbox import BACKENDS, SandboxSpec

DEFAULT_MODEL = "claude-sonnet-5-5"
PRICE_KEYS = ("input", "output", "cache_write", "cache_read")


@dataclass(frozen=True)
class Budget:
    """Caps on one agent run; the loop stops cleanly at the first one reached."""

    max_turns: int = 60
    max_tokens: int = 5_000_000
    max_cost_usd: float = 10.0
    max_wall_s: float = 3600.0


@dataclass(frozen=True)
class Settings:
    """Everything a job needs to know about its environment."""

    model: str = DEFAULT_MODEL
    anthropic_api_key: str | None = None
    anthropic_base_url: str | None = None
    sandbox_mode: str = "docker"
    sandbox_image: str = "decode-sandbox:latest"
    github_token: str | None = None
    github_app_id: str | None = None
    github_app_private_key: str | None = None
    github_app_private_key_path: Path | None = None  # hidden from every sandbox, wherever it is
    github_webhook_secret: str | None = None
    github_api_url: str = "https://api.github.com"
    data_dir: Path = Path.home() / ".decode"
    trigger_label: str = "agent"
    command: str = "/decode"
    public_url: str | None = None
    github_client_id: str | None = None  # the App's OAuth client, for dashboard sign-in (GITHUB_CLIENT_ID)
    github_client_secret: str | None = None  # (GITHUB_CLIENT_SECRET)
    metrics_token: str | None = None  # /metrics needs it as a bearer token unless bound privately (DECODE_METRICS_TOKEN)
    budget: Budget = field(default_factory=Budget)
    prices: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    workers: int = 4
    lease_s: float = 120.0
    max_attempts: int = 3
    shutdown_grace_s: float = 30.0
    health_recheck_s: float = 60.0  # /healthz asks GitHub about the credentials at most this often
    sandbox_hide: tuple[Path, ...] = ()  # more host paths the sandbox must not see (the Action: checkout, temp, HOME)
    sandbox_path: tuple[str, ...] = ()  # host PATH entries the sandbox puts first when it can see them (bwrap)
    cgroup_parent: Path | None = None  # bwrap: a delegated cgroup v2 directory (DECODE_CGROUP_PARENT)
    max_disk_mb: int = 10240  # what one run's agent may write, workspace and temp (DECODE_MAX_DISK_MB)
    max_file_mb: int = 50  # the largest file carried back from the sandbox (DECODE_MAX_FILE_MB)
    keep_days: float = 30.0  # runs/ keeps a run's transcripts and record this long (DECODE_KEEP_DAYS)
    setup_cache_mb: int = 10240  # the docker setup cache's total size; 0 turns it off (DECODE_SETUP_CACHE_MB)
    database_url: str | None = None  # the PostgreSQL job store (DECODE_DATABASE_URL); None: SQLite in data_dir
    pool_size: int = 0  # docker and modal: warm sandboxes kept ready per process (DECODE_POOL_SIZE)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> "Settings":
        """Build settings from `env` (default `os.environ`), then apply `overrides`."""
        env = os.environ if env is None else env
        values: dict[str, object] = {
            "model": env.get("DECODE_MODEL") or DEFAULT_MODEL,
            "anthropic_api_key": env.get("ANTHROPIC_API_KEY") or None,
            "anthropic_base_url": env.get("ANTHROPIC_BASE_URL") or None,
            "sandbox_mode": _choice(env, "SANDBOX_MODE", tuple(BACKENDS), "docker"),
            "sandbox_image": env.get("DECODE_SANDBOX_IMAGE") or "decode-sandbox:latest",
            "github_token": env.get("GITHUB_TOKEN") or None,
            "github_app_id": env.get("GITHUB_APP_ID") or None,
            "github_app_private_key": _private_key(env),
            "github_app_private_key_path": Path(env["GITHUB_APP_PRIVATE_KEY_PATH"])
            if env.get("GITHUB_APP_PRIVATE_KEY_PATH") else None,
            "github_webhook_secret": env.get("GITHUB_WEBHOOK_SECRET") or None,
            "github_api_url": (env.get("GITHUB_API_URL") or "https://api.github.com").rstrip("/"),
            "data_dir": _data_dir(env),
            "trigger_label": env.get("DECODE_TRIGGER_LABEL") or "agent",
            "command": env.get("DECODE_COMMAND") or "/decode",
            "public_url": (env.get("DECODE_PUBLIC_URL") or "").rstrip("/") or None,
            "github_client_id": env.get("GITHUB_CLIENT_ID") or None,
            "github_client_secret": env.get("GITHUB_CLIENT_SECRET") or None,
            "metrics_token": env.get("DECODE_METRICS_TOKEN") or None,
            "budget": Budget(
                max_turns=_number(env, "DECODE_MAX_TURNS", int, Budget.max_turns),
                max_tokens=_number(env, "DECODE_MAX_TOKENS", int, Budget.max_tokens),
                max_cost_usd=_number(env, "DECODE_MAX_COST_USD", float, Budget.max_cost_usd),
                max_wall_s=60 * _number(env, "DECODE_TIMEOUT_MINUTES", float, Budget.max_wall_s / 60),
            ),
            "prices": _prices(env),
            "workers": _workers(env),
            "lease_s": _number(env, "DECODE_LEASE_SECONDS", float, 120.0),
            "max_attempts": _number(env, "DECODE_MAX_ATTEMPTS", int, 3),
            "shutdown_grace_s": _number(env, "DECODE_SHUTDOWN_GRACE_SECONDS", float, 30.0),
            "health_recheck_s": _number(env, "DECODE_HEALTH_RECHECK_SECONDS", float, 60.0),
            "cgroup_parent": Path(env["DECODE_CGROUP_PARENT"]) if env.get("DECODE_CGROUP_PARENT") else None,
            "max_disk_mb": _number(env, "DECODE_MAX_DISK_MB", int, 10240),
            "max_file_mb": _number(env, "DECODE_MAX_FILE_MB", int, 50),
            "keep_days": _number(env, "DECODE_KEEP_DAYS", float, 30.0),
            "setup_cache_mb": _setup_cache_mb(env),
            "database_url": _database_url(env),
            "pool_size": _pool_size(env),
        }
        values.update(overrides)
        return cls(**values)  # type: ignore[arg-type]

    def replace(self, **changes: object) -> "Settings":
        """A copy with `changes` applied."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    @property
    def github_web_url(self) -> str:
        """Where people use GitHub (sign-in, the App manifest flow): github.com for the public API, the
        Enterprise host for `https://HOST/api/v3`, else the API's own base (the test double serves both)."""
        api = self.github_api_url
        if api == "https://api.github.com":
            return "https://github.com"
        return api.removesuffix("/api/v3")

    def sandbox_spec(self, workspace: Path, **fields: Any) -> SandboxSpec:
        """The sandbox of a run on `workspace` under these settings (`fields` add the run's own: image, name,
        gpu). The server fills its warm pool from the same spec, so a run's sandbox matches the pool's."""
        base: dict[str, Any] = {"image": self.sandbox_image, "hide": self.secret_paths(), "path": self.sandbox_path,
                                "cgroup_parent": self.cgroup_parent, "disk_mb": self.max_disk_mb,
                                "pool_size": self.pool_size, "pool_dir": self.data_dir / "pool"}
        return SandboxSpec(workspace=workspace, **{**base, **fields})

    def secret_paths(self) -> tuple[Path, ...]:
        """Host paths holding a secret, which no sandbox may show: the data dir and the App key file."""
        paths = [self.data_dir, *self.sandbox_hide]
        if self.github_app_private_key_path is not None:
            paths.append(self.github_app_private_key_path)
        return tuple(paths)

    @functools.cached_property
    def redactor(self) -> Redactor:
        """The redactor of `secrets()`, built once per settings value (so once per process); a job adds its
        token with `redactor.plus(token)`."""
        return Redactor(self.secrets())

    def secrets(self) -> list[str]:
        """Every configured secret value, for redaction."""
        values = [self.anthropic_api_key, self.github_token, self.github_app_private_key,
                  self.github_webhook_secret, self.github_client_secret, self.metrics_token,
                  self.database_url, database_password(self.database_url)]
        return [v for v in values if v]


def database_password(url: str | None) -> str | None:
    """The password in a database URL (`postgresql://user:PASSWORD@host/db`), None without one: a secret,
    redacted from logs on its own too, since libpq's errors can quote it apart from the URL."""
    if not url:
        return None
    try:
        password = urlsplit(url).password
    except ValueError:
        return None
    return unquote(password) if password else None


def _count(env: Mapping[str, str], name: str, default: int, fix: str) -> int:
    """`name` as a whole number, 0 included (`default` when unset); a ConfigError that says `fix` otherwise."""
    raw = (env.get(name) or "").strip() or str(default)
    if not raw.isdigit():
        raise ConfigError(fix.format(raw=raw))
    return int(raw)


def _setup_cache_mb(env: Mapping[str, str]) -> int:
    """DECODE_SETUP_CACHE_MB: a whole number of megabytes, 0 to turn the setup cache off."""
    return _count(env, "DECODE_SETUP_CACHE_MB", 10240, "DECODE_SETUP_CACHE_MB must be a whole number of megabytes "
                  "for the setup cache (default 10240; 0 turns it off), not {raw!r}")


def _workers(env: Mapping[str, str]) -> int:
    """DECODE_WORKERS: how many jobs this process runs at once (default 4); 0 makes `decode serve` intake only."""
    return _count(env, "DECODE_WORKERS", 4, "DECODE_WORKERS={raw!r} is not valid: set it to how many jobs a process "
                  "runs at once (0: decode serve only takes deliveries, and decode worker processes run them)")


def _pool_size(env: Mapping[str, str]) -> int:
    """DECODE_POOL_SIZE: how many warm sandboxes each process keeps ready (docker, modal); 0 = none."""
    return _count(env, "DECODE_POOL_SIZE", 0,
                  "DECODE_POOL_SIZE={raw!r} is not valid: set it to a number of warm sandboxes (0 = none)")


def _database_url(env: Mapping[str, str]) -> str | None:
    """DECODE_DATABASE_URL when set: it must be a PostgreSQL URL. The error never shows the value (it may
    carry a password)."""
    url = (env.get("DECODE_DATABASE_URL") or "").strip()
    if not url:
        return None
    if not url.startswith(("postgresql://", "postgres://")):
        scheme = url.split("://", 1)[0] if "://" in url else "no scheme"
        raise ConfigError(f"DECODE_DATABASE_URL is not valid ({scheme}): set it to a PostgreSQL URL, "
                          "postgresql://USER:PASSWORD@HOST:PORT/DATABASE, or unset it for the embedded SQLite store")
    return url


def _private_key(env: Mapping[str, str]) -> str | None:
    key = env.get("GITHUB_APP_PRIVATE_KEY")
    path = env.get("GITHUB_APP_PRIVATE_KEY_PATH")
    if not key and path:
        try:
            key = Path(path).read_text()
        except OSError as e:
            raise ConfigError(f"GITHUB_APP_PRIVATE_KEY_PATH={path}: cannot read it ({e.strerror})") from None
    if key and "PRIVATE KEY" not in key:
        raise ConfigError("GITHUB_APP_PRIVATE_KEY is not valid: set it to the app's PEM private key text")
    return key or None


def _choice(env: Mapping[str, str], name: str, allowed: tuple[str, ...], default: str) -> str:
    value = env.get(name) or default
    if value not in allowed:
        raise ConfigError(f"{name}={value!r} is not valid: set it to one of {', '.join(allowed)}")
    return value


def _number(env: Mapping[str, str], name: str, kind: type, default: float) -> float:
    raw = env.get(name)
    if not raw:
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not valid: set it to a positive {kind.__name__}") from None
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{name}={raw!r} is not valid: set it to a positive {kind.__name__}")
    return value


def _data_dir(env: Mapping[str, str]) -> Path:
    """DECODE_DATA_DIR made absolute (a relative one is taken from the current directory), else ~/.decode."""
    raw = env.get("DECODE_DATA_DIR")
    return Path(raw).expanduser().resolve() if raw else Path.home() / ".decode"


def _prices(env: Mapping[str, str]) -> dict[str, dict[str, float]]:
    raw = env.get("DECODE_PRICES")
    if not raw:
        return {}
    try:
        table = json.loads(raw)
        prices = {m: {k: float(v) for k, v in p.items()} for m, p in table.items()}
    except (ValueError, AttributeError, TypeError):
        raise ConfigError(
            'DECODE_PRICES is not valid: set it to JSON like '
            '{"model-id": {"input": 3, "output": 15, "cache_write": 3.75, "cache_read": 0.3}} (USD per million tokens)'
        ) from None
    for model, row in prices.items():
        for key in ("input", "output"):
            if key not in row:
                raise ConfigError(f"DECODE_PRICES: the row for {model!r} has no {key!r}: give input and output "
                                  "(optionally cache_write, cache_read) in USD per million tokens")
        for key, value in row.items():
            if key not in PRICE_KEYS or not math.isfinite(value) or value < 0:
                raise ConfigError(f"DECODE_PRICES: the row for {model!r} has {key}={value!r}: the keys are "
                                  f"{', '.join(PRICE_KEYS)}, each a non-negative number (USD per million tokens)")
    return prices
