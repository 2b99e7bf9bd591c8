"""Settings read once from the environment and passed down as a value.

Nothing reads `os.environ` after start-up: a job gets its `Settings`, so one
repository's configuration can never leak into another's job. A missing or
malformed variable is a `ConfigError` naming the variable and what it should hold.

`Settings` is built from the table in `table.py` (one row per setting, its
default written once) and composed of the parts the program uses: `model`,
`github`, `sandbox`, `pool` (the job workers), `store`, `web` and `budget`.
A part of the program takes the part it reads (`open_store(settings.store)`,
`make_model(settings.model)`, `sandbox_spec(settings.sandbox, ...)`); only the layers above the run
layer hold the whole value (docs/architecture.md, tests/test_import_graph.py).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from bot.core.redact import Redactor, credential_values
from bot.config.table import DEFAULT_MODEL, PRICE_KEYS, ROWS, SANDBOX_MODES, RemoteMcp, Row

__all__ = ["DEFAULT_MODEL", "PRICE_KEYS", "ROWS", "SANDBOX_MODES", "Budget", "GitHubSettings", "ModelSettings",
           "McpSettings", "PoolSettings", "RemoteMcp", "RunParts", "SandboxSettings", "Settings", "StoreSettings",
           "WebSettings", "database_password"]


ROW_KEYS = {row.key: row for row in ROWS}


@dataclass(frozen=True)
class ModelSettings:
    """The model and its API: what `make_model` builds a client from."""

    name: str
    provider: str  # anthropic | bedrock | vertex (bot.model.providers)
    api_key: str | None = field(repr=False)  # a secret
    base_url: str | None
    aws_region: str | None
    aws_access_key_id: str | None
    aws_secret_access_key: str | None = field(repr=False)  # a secret
    aws_session_token: str | None = field(repr=False)  # a secret
    aws_profile: str | None
    aws_bearer_token: str | None = field(repr=False)  # a secret
    bedrock_base_url: str | None
    vertex_region: str | None
    vertex_project_id: str | None
    vertex_base_url: str | None
    google_credentials: Path | None  # a key file: hidden from every sandbox
    prices: Mapping[str, Mapping[str, float]]
    thinking: str | int  # DECODE_THINKING: "on", "off" or a budget in tokens


@dataclass(frozen=True)
class GitHubSettings:
    """How the bot reaches GitHub (as the App, with a token, and as the App's OAuth client for sign-in) and what
    starts a run there."""

    token: str | None = field(repr=False)  # a secret
    app_id: str | None
    app_private_key: str | None = field(repr=False)  # a secret
    app_private_key_path: Path | None
    webhook_secret: str | None = field(repr=False)  # a secret
    api_url: str
    trigger_label: str
    command: str
    max_bot_runs: int
    client_id: str | None
    client_secret: str | None = field(repr=False)  # a secret
    writes_per_minute: int = 80  # GitHub's secondary limit on content creation (bot/github/pacing.py)

    @property
    def sets_app(self) -> bool:
        """Whether any App credential is set (the environment's, or DECODE_DATA_DIR/app.json's once applied)."""
        return bool(self.app_id or self.app_private_key or self.webhook_secret)

    @property
    def has_credentials(self) -> bool:
        """Whether these settings name GitHub credentials: an App's, or a token (`decode serve` in token mode).
        Without any, the server is in setup mode."""
        return self.sets_app or bool(self.token)

    @property
    def web_url(self) -> str:
        """Where people use GitHub (sign-in, the App manifest flow): github.com for the public API, the
        Enterprise host for `https://HOST/api/v3`, else the API's own base (the test double serves both)."""
        if self.api_url == "https://api.github.com":
            return "https://github.com"
        return self.api_url.removesuffix("/api/v3")


@dataclass(frozen=True)
class SandboxSettings:
    """What the sandbox layer needs to build a run's `SandboxSpec` (`bot.sandbox.sandbox_spec`). `hide` is
    every host path holding a secret: the data dir, the operator's `hide_paths` (DECODE_HIDE_PATHS), the
    program's `sandbox_hide`, the App key file and the providers' `credential_files`; the backends read `hide`
    only."""

    mode: str
    image: str
    hide_paths: tuple[Path, ...]
    hide: tuple[Path, ...]
    credential_files: tuple[Path, ...]  # GOOGLE_APPLICATION_CREDENTIALS, AWS_SHARED_CREDENTIALS_FILE, ...
    path: tuple[str, ...]
    cgroup_parent: Path | None
    max_disk_mb: int
    max_memory_mb: int
    max_restarts: int
    max_file_mb: int
    setup_cache_mb: int
    pool_size: int
    pool_dir: Path
    allow_cidrs_max: tuple[str, ...]  # the operator's ceiling on decode.yml's allow_cidrs


@dataclass(frozen=True)
class McpSettings:
    """MCP servers (bot/agent/mcp.py): the operator's remote ones, and the timeouts every server runs under."""

    servers: tuple[RemoteMcp, ...] = field(repr=False)  # their headers are secrets
    start_s: float
    call_s: float


@dataclass(frozen=True)
class PoolSettings:
    """The job workers of one process."""

    workers: int
    shutdown_grace_s: float


@dataclass(frozen=True)
class StoreSettings:
    """Where jobs and runs are kept: what `open_store` opens."""

    data_dir: Path
    database_url: str | None = field(repr=False)  # a secret
    lease_s: float
    max_attempts: int
    keep_days: float
    mirror_mb: int  # 0: no mirrors
    max_running_per_installation: int  # 0: no cap
    max_running_per_repo: int  # 0: no cap


@dataclass(frozen=True)
class WebSettings:
    """The server's web pieces: its public URL (links, sign-in callback), /metrics, /healthz."""

    public_url: str | None
    metrics_token: str | None = field(repr=False)  # a secret
    health_recheck_s: float


def default(key: str) -> Any:
    """The value of the row `key` when its variable is unset."""
    return ROW_KEYS[key].read({})


@dataclass(frozen=True)
class Budget:
    """Caps on one agent run; the loop stops cleanly at the first one reached. The agent loop takes it
    alone, so it can be made on its own: a field not given is the table's default."""

    max_turns: int = default("max_turns")
    max_tokens: int = default("max_tokens")
    max_cost_usd: float = default("max_cost_usd")
    max_wall_s: float = default("max_wall_s")


@dataclass(frozen=True)
class RunParts:
    """The parts of the settings one run reads (`bot.run.pipeline.execute`, `bot.run.attempts.run_attempts`),
    with the process's redactor: what a door hands the run layer instead of the whole `Settings`."""

    model: ModelSettings
    sandbox: SandboxSettings
    mcp: McpSettings
    store: StoreSettings
    budget: Budget
    redactor: Redactor


@dataclass(frozen=True)
class JobParts:
    """The parts of the settings one GitHub job reads (`bot.github.job.run_github_job`, `bot.jobs.handler`): the
    GitHub part (commands, caps, the API), the web part (its transcript links) and what its run reads."""

    github: GitHubSettings
    web: WebSettings
    run: RunParts


GROUPS: dict[str, type] = {"model": ModelSettings, "github": GitHubSettings, "sandbox": SandboxSettings,
                           "mcp": McpSettings, "pool": PoolSettings, "store": StoreSettings, "web": WebSettings,
                           "budget": Budget}


class Settings:
    """Everything a job needs to know about its environment, one part per user of it.

    Built from rows: `Settings(**values)` takes the table's row keys (`data_dir=...`, `sandbox_mode=...`),
    or a whole part by its name (`budget=Budget(...)`); whatever is not given is the row's default."""

    model: ModelSettings
    github: GitHubSettings
    sandbox: SandboxSettings
    mcp: McpSettings
    pool: PoolSettings
    store: StoreSettings
    web: WebSettings
    budget: Budget
    _rows: dict[str, Any]  # row key -> value, set once in __init__

    def __init__(self, **values: Any) -> None:
        rows = dict(_defaults())
        for key, value in values.items():
            if key in GROUPS and isinstance(value, GROUPS[key]):
                rows.update({row.key: getattr(value, _field(row)) for row in ROWS if _group(row) == key
                             and row.key != "sandbox_hide"})
            elif key in ROW_KEYS:
                rows[key] = value
            else:
                raise TypeError(f"Settings() got an unexpected keyword argument {key!r}")
        object.__setattr__(self, "_rows", rows)
        for name, part in _compose(rows).items():
            object.__setattr__(self, name, part)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> "Settings":
        """Build settings from `env` (default `os.environ`), then apply `overrides` (row keys or parts)."""
        return cls(**{**read_env(os.environ if env is None else env), **overrides})

    def replace(self, **changes: Any) -> "Settings":
        """A copy with `changes` (row keys or parts) applied."""
        return Settings(**{**self._rows, **changes})

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Settings are frozen: use settings.replace({name}=...)")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Settings) and self._rows == other._rows

    __hash__ = None  # type: ignore[assignment]  # equal by value and not hashable, as a dataclass with eq

    def __repr__(self) -> str:
        return "Settings(" + ", ".join(f"{name}={getattr(self, name)!r}" for name in GROUPS) + ")"

    @property
    def run(self) -> RunParts:
        """The parts a run reads, this process's redactor among them."""
        return RunParts(self.model, self.sandbox, self.mcp, self.store, self.budget, self.redactor)

    @property
    def job(self) -> JobParts:
        """The parts a GitHub job reads, this process's redactor among them (in `run`)."""
        return JobParts(self.github, self.web, self.run)

    @functools.cached_property
    def redactor(self) -> Redactor:
        """The redactor of `secrets()`, built once per settings value (so once per process); a job adds its
        token with `redactor.plus(token)`."""
        return Redactor(self.secrets())

    def secrets(self) -> list[str]:
        """Every configured secret value, for redaction: the secret rows, the operator's MCP servers' header
        values (and each word of one), the database password and what the providers' credentials files hold
        (`file_secrets`)."""
        values = [self._rows[row.key] for row in ROWS if row.secret and isinstance(self._rows[row.key], str)]
        # a header's value and each word of it: `Bearer TOKEN` leaks as TOKEN alone, when a server says it back
        values += [part for server in self.mcp.servers for _, value in server.headers
                   for part in (value, *value.split())]
        files = [value for path in self.sandbox.credential_files for value in _file_secrets(path)]
        return [v for v in [*values, database_password(self.store.database_url), *files] if v]


def read_env(env: Mapping[str, str]) -> dict[str, Any]:
    """Every row's value in `env`, by row key; the first malformed one is a ConfigError."""
    return {row.key: row.read(env) for row in ROWS}


@functools.cache
def _defaults() -> Mapping[str, Any]:
    return read_env({})


def _group(row: Row) -> str:
    return row.lands.split(".", 1)[0]


def _field(row: Row) -> str:
    return row.lands.split(".", 1)[1]


def _compose(rows: Mapping[str, Any]) -> dict[str, Any]:
    """The parts, from the rows by where each lands; the sandbox's `hide` and `pool_dir` follow the data dir."""
    fields: dict[str, dict[str, Any]] = {name: {} for name in GROUPS}
    for row in ROWS:
        fields[_group(row)][_field(row)] = rows[row.key]
    data = Path(rows["data_dir"])
    key_files = [f for f in (rows["github_app_private_key_path"],) if f is not None] + [*rows["credential_files"]]
    fields["sandbox"]["hide"] = (data, *rows["hide_paths"], *rows["sandbox_hide"], *key_files)
    fields["sandbox"]["pool_dir"] = data / "pool"
    return {name: GROUPS[name](**fields[name]) for name in GROUPS}


def _file_secrets(path: Path, limit: int = 1024 * 1024) -> list[str]:
    """What a credentials file holds, as secret values (`credential_values`); nothing when it cannot be read
    (the SDK that reads it says so)."""
    try:
        with path.open("rb") as f:
            return credential_values(f.read(limit).decode("utf-8", "replace"))
    except OSError:
        return []


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
