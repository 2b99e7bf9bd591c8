"""The model boundary: one call of the Messages API, whatever answers it.

`Model.complete` takes the system prompt, the conversation and the tool schemas
in Anthropic's Messages format and returns the assistant's content blocks plus
token usage. Implementations are picked by `make_model` from the model id:
`scripted:PATH` replays a recorded or hand-written session, anything else goes
to the Messages API of `DECODE_PROVIDER` (Anthropic, Bedrock or Vertex AI,
`providers.py`). The protocol itself is in `protocol.py`. The Anthropic SDK
is imported only when a model is made: it takes over a second to load, and
`decode --version`, `decode check` (but for Bedrock and Vertex AI, whose configuration it checks by
building the client), every input error and every run of a scripted model answer without it. For a real
model, `preload` starts that import on a background thread at the start of a run, so that it overlaps the
work before the model is first needed.
"""

from __future__ import annotations

import importlib
import threading

from bot.config import ModelSettings
from bot.core.errors import ConfigError
from bot.model.info import ModelInfo
from bot.model.protocol import Model, PromptTooLong, Reply, Usage
from bot.model.scripted import ScriptedModel

__all__ = ["Model", "ModelInfo", "PromptTooLong", "Reply", "Usage", "make_model", "preload", "shared_model"]

_preloading: list[threading.Thread] = []


def preload(model: ModelSettings) -> None:
    """Start importing the SDK on a daemon thread when `model` is a real one (at most once per process), so
    `make_model` later finds it loaded or waits only for the rest (Python's import lock makes it wait for
    the thread rather than import twice). Nothing for a scripted model, which never needs it."""
    if model.name.startswith("scripted:") or _preloading:
        return
    thread = threading.Thread(target=_import_sdk, name="decode-preload-sdk", daemon=True)
    _preloading.append(thread)
    thread.start()


def _import_sdk() -> None:
    try:
        importlib.import_module("bot.model.anthropic")
    except Exception:  # make_model's own import raises it again, where it is reported
        pass


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
