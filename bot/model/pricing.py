"""USD per million tokens by model family, overridable with DECODE_PRICES.

Prices from https://docs.anthropic.com/en/docs/about-claude/pricing; cache
writes cost 1.25x input (5-minute TTL), cache reads 0.1x input.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from bot.model.protocol import Usage

FAMILY_PRICES: dict[str, dict[str, float]] = {
    "claude-opus-4-0": {"input": 15.0, "output": 75.0},
    "claude-opus-4-1": {"input": 15.0, "output": 75.0},
    "claude-opus": {"input": 5.0, "output": 25.0},
    "claude-sonnet": {"input": 3.0, "output": 15.0},
    "claude-haiku": {"input": 1.0, "output": 5.0},
    "scripted": {"input": 3.0, "output": 15.0},
}


def family_id(model: str) -> str:
    """`model` as the Anthropic API spells it: Bedrock's `us.anthropic.claude-sonnet-4-5-20250929-v1:0` (a
    cross-region prefix, `anthropic.`, a `-vN:N` version) and Vertex's `claude-sonnet-4-5@20250929` become
    `claude-sonnet-4-5-20250929`."""
    name = model.split("/")[-1]  # a Bedrock inference profile ARN ends in the model id
    name = re.sub(r"^(?:[a-z]{2,6}\.)?anthropic\.", "", name)
    name = re.sub(r"-v\d+(?::\d+)?$", "", name)
    return name.replace("@", "-")


def price_for(model: str, overrides: Mapping[str, Mapping[str, float]] | None = None) -> dict[str, float]:
    """The price row for `model`: an exact override, else the longest matching family prefix of its
    Anthropic id (`family_id`: Bedrock and Vertex ids are priced as the model they serve)."""
    if overrides and model in overrides:
        row = dict(overrides[model])
    else:
        name = family_id(model)
        family = max((f for f in FAMILY_PRICES if name.startswith(f)), key=len, default="claude-sonnet")
        row = dict(FAMILY_PRICES[family])
    row.setdefault("cache_write", row["input"] * 1.25)
    row.setdefault("cache_read", row["input"] * 0.1)
    return row


def cost_usd(model: str, usage: Usage, overrides: Mapping[str, Mapping[str, float]] | None = None) -> float:
    """What `usage` costs on `model`, in USD."""
    p = price_for(model, overrides)
    return (
        usage.input_tokens * p["input"]
        + usage.output_tokens * p["output"]
        + usage.cache_creation_tokens * p["cache_write"]
        + usage.cache_read_tokens * p["cache_read"]
    ) / 1_000_000
