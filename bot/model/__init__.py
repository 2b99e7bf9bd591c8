"""The model boundary: one call of the Messages API, whatever answers it.

`Model.complete` takes the system prompt, the conversation and the tool schemas
in Anthropic's Messages format and returns the assistant's content blocks plus
token usage. Implementations are picked by `make_model` from the model id:
`scripted:PATH` replays a recorded or hand-written session, anything else goes
to the Messages API of `DECODE_PROVIDER` (Anthropic, Bedrock or Vertex AI,
`providers.py`). The protocol itself is in `protocol.py`. The Anthropic SDK
is imported only when a model is made: it takes over a second to load, and
`decode --version`, `decode check` (but for Bedrock and Vertex AI, whose configuration it checks by
building the client) and every input error answer without it.
"""

from __future__ import annotations

from bot.config import ModelSettings
from bot.core.errors import ConfigError
from bot.model.info import ModelInfo
from bot.model.protocol import Model, PromptTooLong, Reply, Usage
from bot.model.scripted import ScriptedModel

__all__ = ["Model", "ModelInfo", "PromptTooLong", "Reply", "Usage", "make_model", "shared_model"]


def make_model(model: ModelSettings) -> Model:
    """The model named by `model.name` (`DECODE_MODEL`)."""
    if model.name.startswith("scripted:"):
        return ScriptedModel.load(model.name.removeprefix("scripted:"))
    from bot.model.anthropic import AnthropicModel

    return AnthropicModel(model)


def shared_model(model: ModelSettings) -> Model | None:
    """The model a long-running process (`decode serve`, `decode worker`) builds once and gives every run:
    the provider's client, with its connection pool. None for a scripted session, which each run replays
    from its start, and when the provider's configuration is incomplete (no ANTHROPIC_API_KEY, no
    CLOUD_ML_REGION, ...): the server's model check (bot/server/health.py) then holds every job in the
    store, naming the variable to set, so no run gets that far."""
    if model.name.startswith("scripted:"):
        return None
    try:
        return make_model(model)
    except ConfigError:
        return None
