"""The parsers of the settings table (bot/config/table.py): each turns one environment variable into a value,
or a one-line `ConfigError` naming the variable and the fix; `Row` is one setting."""

from __future__ import annotations

import ipaddress
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bot.config.mcp_servers import RemoteMcp, mcp_servers
from bot.core.errors import ConfigError
from bot.core.files import unusable_dir

DEFAULT_MODEL = "claude-sonnet-5-5"
MIN_THINKING_BUDGET = 1024  # the Messages API's smallest `budget_tokens`
PRICE_KEYS = ("input", "output", "cache_write", "cache_read")
SANDBOX_MODES = ("local", "bwrap", "docker", "modal")  # equal to bot.sandbox.BACKENDS' keys (a test checks)
PROVIDERS = ("anthropic", "bedrock", "vertex")  # equal to bot.model.providers.CONNECT's keys (a test checks)

Parser = Callable[[Mapping[str, str], "Row"], Any]


@dataclass(frozen=True)
class Row:
    """One setting: `key` is its keyword in `Settings(...)`, `from_env(...)` and `replace(...)`; `var` the
    environment variable (None: set by the program, never by the environment); `lands` where the value
    sits (`group.field`); `default` as the variable would spell it (what an unset variable means)."""

    key: str
    var: str | None
    lands: str
    default: Any
    parse: Parser
    help: str
    secret: bool = False

    def read(self, env: Mapping[str, str]) -> Any:
        """This row's value in `env`; a ConfigError naming the variable when it is malformed."""
        return self.parse(env, self)


def text(env: Mapping[str, str], row: Row) -> Any:
    """The variable as written, else the default (an empty variable counts as unset)."""
    return env.get(row.var or "") or row.default


def url(env: Mapping[str, str], row: Row) -> str | None:
    """An http(s) base URL without its trailing slash; None when unset and without a default. Anything else is
    refused here, not after a client's retries (a scheme-less or `ftp:` ANTHROPIC_BASE_URL took 40 s to fail)."""
    value = (env.get(row.var or "") or row.default or "").strip().rstrip("/")
    if not value:
        return None
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 (raises ValueError for a port that is not a number)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{row.var}={value!r} is not valid: set it to an http:// or https:// URL "
                          + (f"(default {row.default})" if row.default else "(or unset it)"))
    return value


def token(env: Mapping[str, str], row: Row) -> str | None:
    """A key or token as sent in an HTTP header: printable ASCII without spaces (a pasted line break or space
    otherwise failed as a connection error, after retries, with the key in the message). The value is never
    repeated in the error."""
    value = env.get(row.var or "") or None
    if value is not None and not all(33 <= ord(c) < 127 for c in value):
        raise ConfigError(f"{row.var} holds a space, a line break or a character that is not ASCII: set it to the "
                          "key alone, as issued")
    return value


def path(env: Mapping[str, str], row: Row) -> Path | None:
    """A host path, None when unset."""
    raw = env.get(row.var or "")
    return Path(raw) if raw else None


def paths(env: Mapping[str, str], row: Row) -> tuple[Path, ...]:
    """Absolute host paths separated by `:` (empty entries skipped); the default when unset."""
    raw = env.get(row.var or "") or ""
    found = tuple(Path(entry) for entry in raw.split(":") if entry.strip())
    for entry in found:
        if not entry.is_absolute():
            raise ConfigError(f"{row.var}: {str(entry)!r} is not an absolute path: give absolute host paths "
                              "separated by ':'")
    return found or row.default


# Variables a provider's SDK (or a runner's auth step) reads a credentials file from: every file they name is
# hidden from every sandbox and its contents are redacted like a secret value (`Settings.secrets`).
CREDENTIAL_FILE_VARS = ("GOOGLE_APPLICATION_CREDENTIALS", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE",
                        "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
                        "CLOUDSDK_AUTH_CREDENTIAL_FILE_OVERRIDE", "GOOGLE_GHA_CREDS_PATH")


def credential_files(env: Mapping[str, str], row: Row) -> tuple[Path, ...]:
    """The files `CREDENTIAL_FILE_VARS` name, as set (`~` expanded, as the SDKs do)."""
    return tuple(Path(env[var]).expanduser() for var in CREDENTIAL_FILE_VARS if env.get(var))


def fixed(env: Mapping[str, str], row: Row) -> Any:
    """A setting the program sets (no variable): always the default until overridden."""
    return row.default


def data_dir(env: Mapping[str, str], row: Row) -> Path:
    """DECODE_DATA_DIR made absolute (a relative one is taken from the current directory); a ConfigError when
    it is a file, or cannot be made or written by this user, before any command starts on it."""
    raw = env.get(row.var or "")
    try:
        path = Path(raw).expanduser().resolve() if raw else Path(row.default).expanduser()
    except RuntimeError:  # `~user` of no such user, or `~` without HOME
        raise ConfigError(f"{row.var}={raw or row.default}: the home directory of `~` is unknown here: set "
                          f"{row.var} to an absolute path") from None
    if problem := unusable_dir(path):
        given = f"{row.var}={raw}" if raw else f"{row.var} (unset: {path})"
        raise ConfigError(f"{given} {problem}: set {row.var} to a directory this user may write")
    return path


def choice(allowed: tuple[str, ...]) -> Parser:
    """A parser that accepts one of `allowed`."""
    def parse(env: Mapping[str, str], row: Row) -> str:
        value = env.get(row.var or "") or row.default
        if value not in allowed:
            raise ConfigError(f"{row.var}={value!r} is not valid: set it to one of {', '.join(allowed)}")
        return value
    return parse


def positive(kind: type, scale: float = 1) -> Parser:
    """A parser for a positive `kind` (int or float), multiplied by `scale` (minutes to seconds)."""
    def parse(env: Mapping[str, str], row: Row) -> float:
        raw = env.get(row.var or "")
        if not raw:
            return row.default * scale
        try:
            value = kind(raw)
        except ValueError:
            raise ConfigError(f"{row.var}={raw!r} is not valid: set it to a positive {kind.__name__}") from None
        if not math.isfinite(value) or value <= 0:
            raise ConfigError(f"{row.var}={raw!r} is not valid: set it to a positive {kind.__name__}")
        return value * scale
    return parse


def count(fix: str, most: int | None = None) -> Parser:
    """A parser for a whole number, 0 included, up to `most`; `fix` is the error (with `{raw}` and `{default}`)."""
    def parse(env: Mapping[str, str], row: Row) -> int:
        raw = (env.get(row.var or "") or "").strip() or str(row.default)
        if not raw.isdigit() or most is not None and int(raw) > most:
            raise ConfigError(fix.format(raw=raw, default=row.default) + (f" (at most {most})" if most else ""))
        return int(raw)
    return parse


def line(env: Mapping[str, str], row: Row) -> str | None:
    """Text on one line, else the default: a value with a line break or another control character, or one of
    spaces alone, is refused (a pasted line break made every webhook signature fail, or named no model). The
    value is never repeated in the error: it may be a secret."""
    value = env.get(row.var or "") or None
    if value is not None and (not value.strip() or any(ord(c) < 32 or ord(c) == 127 for c in value)):
        raise ConfigError(f"{row.var} is blank or holds a line break or a control character: set it to the value "
                          "alone, on one line")
    return value or row.default


def cidrs(env: Mapping[str, str], row: Row) -> tuple[str, ...]:
    """Comma-separated CIDRs (host bits allowed, as in 10.1.2.3/8), as written; () when unset."""
    raw = (env.get(row.var or "") or "").strip()
    found = tuple(part.strip() for part in raw.split(",") if part.strip())
    for cidr in found:
        try:
            ipaddress.ip_network(cidr, strict=False)
        except ValueError:
            raise ConfigError(f"{row.var} has {cidr!r}, which is not a CIDR: set it to comma-separated ranges "
                              "like 10.20.0.0/16,fd12:3456::/48, or unset it") from None
    return found


def private_key(env: Mapping[str, str], row: Row) -> str | None:
    """GITHUB_APP_PRIVATE_KEY, else the file at GITHUB_APP_PRIVATE_KEY_PATH; it must be PEM text."""
    key = env.get("GITHUB_APP_PRIVATE_KEY")
    key_path = env.get("GITHUB_APP_PRIVATE_KEY_PATH")
    if not key and key_path:
        try:
            key = Path(key_path).read_text()
        except OSError as e:
            raise ConfigError(f"GITHUB_APP_PRIVATE_KEY_PATH={key_path}: cannot read it ({e.strerror})") from None
    if key and "PRIVATE KEY" not in key:
        if env.get("GITHUB_APP_PRIVATE_KEY"):
            raise ConfigError("GITHUB_APP_PRIVATE_KEY is not valid: set it to the app's PEM private key text")
        raise ConfigError(f"GITHUB_APP_PRIVATE_KEY_PATH={key_path} is not a PEM private key: point it at the "
                          "App's .pem file (GitHub App settings > Private keys)")
    return key or None


def database_url(env: Mapping[str, str], row: Row) -> str | None:
    """A PostgreSQL URL when set. The error never shows the value (it may carry a password)."""
    value = (env.get(row.var or "") or "").strip()
    if not value:
        return None
    if not value.startswith(("postgresql://", "postgres://")):
        scheme = value.split("://", 1)[0] if "://" in value else "no scheme"
        raise ConfigError(f"DECODE_DATABASE_URL is not valid ({scheme}): set it to a PostgreSQL URL, "
                          "postgresql://USER:PASSWORD@HOST:PORT/DATABASE, or unset it for the embedded SQLite store")
    return value


def thinking_value(value: object, where: str) -> str | int:
    """A thinking setting as `DECODE_THINKING` or decode.yml's `thinking` spells it: `on`, `off` (YAML's
    true/false too), or a budget in tokens of at least the API's minimum; `where` names it in the error."""
    if value is True or value is False:
        return "on" if value else "off"
    raw = str(value).strip().lower() if isinstance(value, (str, int)) else ""
    if raw in ("on", "off"):
        return raw
    if raw.isdigit() and int(raw) >= MIN_THINKING_BUDGET:
        return int(raw)
    raise ConfigError(f"{where}={value!r} is not valid: set it to on, off or a thinking budget in tokens of at "
                      f"least {MIN_THINKING_BUDGET} (such as 16000)")


def thinking(env: Mapping[str, str], row: Row) -> str | int:
    """DECODE_THINKING: on, off or a budget in tokens."""
    return thinking_value(env.get(row.var or "") or row.default, str(row.var))


def prices(env: Mapping[str, str], row: Row) -> dict[str, dict[str, float]]:
    """DECODE_PRICES: JSON, model id -> USD per million tokens of each kind."""
    raw = env.get(row.var or "")
    if not raw:
        return {}
    try:
        table = json.loads(raw)
        parsed = {m: {k: float(v) for k, v in p.items()} for m, p in table.items()}
    except (ValueError, AttributeError, TypeError):
        raise ConfigError(
            'DECODE_PRICES is not valid: set it to JSON like '
            '{"model-id": {"input": 3, "output": 15, "cache_write": 3.75, "cache_read": 0.3}} (USD per million tokens)'
        ) from None
    for model, price_row in parsed.items():
        for key in ("input", "output"):
            if key not in price_row:
                raise ConfigError(f"DECODE_PRICES: the row for {model!r} has no {key!r}: give input and output "
                                  "(optionally cache_write, cache_read) in USD per million tokens")
        for key, value in price_row.items():
            if key not in PRICE_KEYS or not math.isfinite(value) or value < 0:
                raise ConfigError(f"DECODE_PRICES: the row for {model!r} has {key}={value!r}: the keys are "
                                  f"{', '.join(PRICE_KEYS)}, each a non-negative number (USD per million tokens)")
    return parsed
