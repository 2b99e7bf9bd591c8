"""The optional parts of decode-bot and the one error for a part that is not installed.

The core install (what the GitHub Action installs) runs `decode run` and `decode action`; the web
server, the PostgreSQL job store and Modal come with pyproject.toml's extras of those names. A
feature whose extra is missing says which one to install where it is first used, instead of an
ImportError traceback, with the command that installs it (from the git repository: the project is
published on no package index).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from bot.core.errors import ConfigError

SOURCE = "git+https://github.com/decode-bot/decode-bot"  # where decode-bot is installed from (docs/cli.md)
# Each extra, with the top-level modules it provides that decode-bot imports.
EXTRAS: dict[str, frozenset[str]] = {
    "server": frozenset({"flask", "werkzeug", "waitress", "prometheus_client", "markdown_it", "nh3"}),
    "postgres": frozenset({"psycopg"}),
    "modal": frozenset({"modal"}),
}


def install_command(extra: str) -> str:
    """The command that adds pyproject.toml's `extra` to this install: decode-bot is installed from its git
    repository (it is on no package index), with pipx when this interpreter is one of pipx's."""
    requirement = f"'decode-bot[{extra}] @ {SOURCE}'"
    return f"pipx install --force {requirement}" if "/pipx/venvs/" in sys.prefix else f"pip install {requirement}"


def missing_extra(extra: str, purpose: str, module: str) -> ConfigError:
    """The one-line error for `purpose` (e.g. "SANDBOX_MODE=modal") when `module`, which pyproject.toml's
    `extra` installs, is not installed."""
    return ConfigError(f"{purpose} needs {module}, which is not installed: {install_command(extra)}")


@contextmanager
def requires_extra(extra: str, purpose: str) -> Iterator[None]:
    """Turn an ImportError of one of `extra`'s modules inside the block into `missing_extra`'s error;
    any other ImportError is a bug and passes unchanged."""
    try:
        yield
    except ImportError as e:
        module = (e.name or "").partition(".")[0]
        if module not in EXTRAS[extra]:
            raise
        raise missing_extra(extra, purpose, module) from None
