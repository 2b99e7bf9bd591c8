"""What `execute` and `run_attempts` take from a `Settings`: each part a run reads, by its parameter's name (a
door passes them the same way: bot/cli/run.py)."""

from __future__ import annotations

from typing import Any

from bot.config import Settings


def run_parts(settings: Settings) -> dict[str, Any]:
    """`settings`' parts as `execute`'s keyword arguments."""
    return {"model": settings.model, "sandbox": settings.sandbox, "mcp": settings.mcp, "store": settings.store,
            "budget": settings.budget, "redactor": settings.redactor}
