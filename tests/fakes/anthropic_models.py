"""The Models API of the fake Anthropic API: GET /v1/models/{model_id}
(https://docs.anthropic.com/en/api/models-get), answering a model's window, output cap and capabilities
as the fake was configured, in the API's `ModelInfo` shape (every capability key present)."""

from __future__ import annotations

from typing import Any

CAPABILITIES = ("batch", "citations", "code_execution", "image_input", "pdf_input", "structured_outputs")
CONTEXT_EDITS = ("clear_thinking_20251015", "clear_tool_uses_20250919", "compact_20260112")
THINKING_TYPES = ("adaptive", "between_tools", "disabled", "enabled")


def model_info(model_id: str, *, window: int, max_output: int, thinking: set[str], context_edits: set[str]
               ) -> dict[str, Any]:
    """The `ModelInfo` object for `model_id`: `thinking` names the thinking types it accepts (empty: none but
    `disabled`), `context_edits` the server-side context management strategies it applies."""
    def support(on: bool) -> dict[str, bool]:
        return {"supported": on}

    types = {name: support(name in thinking or name == "disabled") for name in THINKING_TYPES}
    edits: dict[str, Any] = {name: support(name in context_edits) for name in CONTEXT_EDITS}
    return {
        "type": "model", "id": model_id, "display_name": model_id.replace("-", " ").title(),
        "created_at": "2026-01-01T00:00:00Z", "lifecycle": "active", "max_input_tokens": window,
        "max_tokens": max_output,
        "capabilities": {
            **{name: support(True) for name in CAPABILITIES},
            "context_management": {"supported": bool(context_edits), **edits},
            "effort": {"supported": False},
            "server_tools": {"supported": False},
            "thinking": {"supported": bool(thinking), "types": types},
        },
    }
