"""A model's window and capabilities: from the Models API through the real SDK, else the family's figures."""

from __future__ import annotations

import pytest

from bot.model import make_model
from bot.model.info import built_in
from tests.fakes.anthropic_api import FakeAnthropic


def test_info_comes_from_the_models_api_once_per_process() -> None:
    with FakeAnthropic(window=50_000, max_output=12_000, thinking={"enabled", "adaptive"},
                       context_edits={"clear_tool_uses_20250919"}) as fake:
        model = make_model(fake.settings(model="claude-test-window-a").model)
        info = model.info()
        again = make_model(fake.settings(model="claude-test-window-a").model).info()
    assert (info.window, info.max_output, info.source) == (50_000, 12_000, "models-api")
    assert info.thinking and info.adaptive_thinking
    assert info.context_edits == {"clear_tool_uses_20250919"}
    assert again == info and len(fake.model_lookups) == 1


def test_a_model_without_thinking_says_so() -> None:
    with FakeAnthropic(window=30_000) as fake:
        info = make_model(fake.settings(model="claude-test-window-b").model).info()
    assert (info.window, info.thinking, info.adaptive_thinking, info.context_edits) == (30_000, False, False, set())


def test_an_endpoint_without_the_models_api_gets_the_family_figures() -> None:
    """A compatible endpoint that answers 404 for the lookup: the run goes on with the built-in figures."""
    with FakeAnthropic(models={"claude-sonnet-4-5"}) as fake:  # GET /v1/models/other -> 404 not_found_error
        info = make_model(fake.settings(model="claude-sonnet-4-5-proxy").model).info()
    assert info.source == "built-in" and info.window == 200_000 and info.thinking


def test_built_in_figures_by_family() -> None:
    assert built_in("claude-3-5-haiku-20241022").max_output == 8_192 and not built_in("claude-3-5-haiku").thinking
    assert built_in("claude-opus-4-1-20250805").max_output == 32_000
    assert built_in("us.anthropic.claude-sonnet-4-5-20250929-v1:0").thinking
    assert not built_in("some-compatible-model").thinking and built_in("x").window == 200_000


def test_scripted_sessions_report_no_thinking(tmp_path) -> None:
    session = tmp_path / "s.json"
    session.write_text('[[{"type": "text", "text": "done"}]]')
    from bot.config import Settings

    info = make_model(Settings(model=f"scripted:{session}").model).info()
    assert not info.thinking and info.window == 200_000


def test_a_prompt_over_the_window_is_prompt_too_long() -> None:
    """The API's 400 "prompt is too long" is its own error, so the loop can trim and ask again."""
    from bot.model import PromptTooLong

    with FakeAnthropic(window=200) as fake:
        fake.script([[{"type": "text", "text": "done"}]])
        model = make_model(fake.settings().model)
        with pytest.raises(PromptTooLong, match="prompt is too long"):
            model.complete(system="s", messages=[{"role": "user", "content": "x" * 2_000}], tools=[], max_tokens=10)
        assert model.complete(system="s", messages=[{"role": "user", "content": "hi"}], tools=[],
                              max_tokens=10).text == "done"
    assert fake.prompt_sizes[0] > 200 >= fake.prompt_sizes[1]
