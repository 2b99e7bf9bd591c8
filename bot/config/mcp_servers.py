"""The operator's MCP servers (DECODE_MCP_SERVERS) and the rule for every MCP server's name.

Apart from the settings table so the table stays one row per setting; bot/run/repo_config.py checks
decode.yml's server names with the same `MCP_NAME`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bot.core.errors import ConfigError

MCP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,23}")  # an MCP server's name: `mcp__NAME__TOOL` fits in 64


@dataclass(frozen=True)
class RemoteMcp:
    """An operator's MCP server (DECODE_MCP_SERVERS): reached by the harness on the host over streamable HTTP,
    with `headers` (its credentials) that never reach the sandbox, the model or the transcript."""

    name: str
    url: str
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # secrets


def mcp_servers(env: Mapping[str, str], row: Any) -> tuple[RemoteMcp, ...]:
    """DECODE_MCP_SERVERS: JSON, NAME -> {"url": "https://...", "headers": {"Authorization": "Bearer ..."}}."""
    raw = (env.get(row.var or "") or "").strip()
    if not raw:
        return ()
    fix = (f"{row.var} is not valid: set it to JSON mapping server names (letters, digits, '-') to "
           '{"url": "https://...", "headers": {...}}, or unset it')
    try:
        table = json.loads(raw)
        servers = tuple(RemoteMcp(name, str(entry["url"]), tuple((str(k), str(v)) for k, v in
                                                                 (entry.get("headers") or {}).items()))
                        for name, entry in table.items())
    except (ValueError, AttributeError, TypeError, KeyError):
        raise ConfigError(fix) from None
    if not all(MCP_NAME.fullmatch(s.name) and s.url.startswith(("http://", "https://")) for s in servers):
        raise ConfigError(fix)
    return servers
