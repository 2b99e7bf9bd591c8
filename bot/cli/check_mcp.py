"""`decode check --start`: each MCP server of a local repository's decode.yml, started as a run starts it.

The repository's commit is cloned into a temporary directory, a sandbox is opened on it, setup runs with the
network setup has, the agent's egress policy follows, and `McpServers.start` starts every server there (the
operator's remote ones are connected from the host). Each server's tools are listed, or why it did not start.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bot.agent.mcp import McpRequired, McpServers
from bot.config import Settings
from bot.core.errors import ConfigError, DecodeError
from bot.sandbox import open_sandbox, sandbox_spec
from bot.run.repo_config import RepoConfig
from bot.sandbox.egress_policy import EgressPolicy


def start_servers(settings: Settings, config: RepoConfig, top: str, commit: str,
                  say: Callable[[str], None]) -> list[str]:
    """Start `config`'s MCP servers in a sandbox on `commit` of the local repository at `top`, and say each one's
    tools; the names of those that did not start (a required one that did not ends the start there, as in a run)."""
    if not config.mcp:
        say("mcp --start: no MCP servers in decode.yml")
        return []
    failed: list[str] = []

    def record(kind: str, **event: Any) -> None:
        if event.get("state") == "started":
            say(f"mcp {event['name']}: started (MCP {event['protocol']}), tools: {', '.join(event['tools']) or 'none'}")
        elif event.get("state") == "down":
            failed.append(event["name"])
            say(f"mcp {event['name']}: {event['reason']}")

    with tempfile.TemporaryDirectory(prefix="decode-check-") as tmp:
        workspace = Path(tmp) / "repo"
        clone = subprocess.run(["git", "clone", "-q", "--shared", "--no-checkout", top, str(workspace)],
                               capture_output=True, text=True)
        if clone.returncode != 0 or subprocess.run(["git", "-C", str(workspace), "checkout", "-q", "--detach",
                                                    commit], capture_output=True).returncode != 0:
            raise ConfigError(f"{top}: could not check out {commit[:12]} to start its servers")
        agent = EgressPolicy(internet=config.network, allow_cidrs=config.allow_cidrs,
                             allow_domains=config.allow_domains)
        spec = sandbox_spec(settings.sandbox, workspace, image=config.image or settings.sandbox.image,
                            name="decode-check", gpu=config.gpu)
        sandbox = open_sandbox(settings.sandbox.mode, spec, network=EgressPolicy(
            internet=bool(config.setup), allow_cidrs=config.allow_cidrs) if config.setup else agent)
        servers = McpServers(config.mcp, settings.mcp, record, lambda line: None)
        try:
            for command in config.setup:
                say(f"setup: {command}")
                done = sandbox.run(command, timeout=config.setup_timeout)
                if done.exit_code != 0:
                    raise DecodeError(f"setup command {command!r} failed ({done.exit_code}): {done.output[-500:]}")
            if config.setup:
                sandbox.set_network(agent)
            servers.start(sandbox)
        except McpRequired as e:
            say(f"mcp {e.name}: {e}")
            failed.append(e.name)
        finally:
            servers.close()
            sandbox.close()
    return failed
