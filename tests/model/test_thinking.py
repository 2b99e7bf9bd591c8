"""`plan_thinking`: what DECODE_THINKING (or decode.yml's `thinking`) becomes for a model, by what its Models API
says it supports."""


from bot.model.info import ModelInfo
from bot.model.thinking import DEFAULT_BUDGET, plan_thinking

ADAPTIVE = ModelInfo("claude-new", max_output=64_000, thinking=True, adaptive_thinking=True, source="models-api")
BUDGETED = ModelInfo("claude-mid", max_output=64_000, thinking=True, source="models-api")
NONE = ModelInfo("claude-old", max_output=8_192, source="models-api")



def test_on_is_adaptive_where_the_model_has_it_else_the_default_budget():
    plan = plan_thinking("on", ADAPTIVE, 16_000)
    assert plan.request == {"type": "adaptive"} and plan.max_tokens == 16_000 + DEFAULT_BUDGET and plan.note is None
    plan = plan_thinking("on", BUDGETED, 16_000)
    assert plan.request == {"type": "enabled", "budget_tokens": DEFAULT_BUDGET}
    assert plan.max_tokens == 16_000 + DEFAULT_BUDGET and plan.label == "budget 10,000 tokens"


def test_on_for_a_model_without_thinking_is_off_quietly():
    """`on` is the default and means "where the model has it": a model without thinking runs without a note."""
    plan = plan_thinking("on", NONE, 16_000)
    assert plan.request is None and plan.label == "off" and plan.note is None
    assert plan.max_tokens == 8_192  # never past what the model can write


def test_a_budget_is_enabled_thinking_with_room_for_the_answer_within_the_output_cap():
    plan = plan_thinking(4096, ADAPTIVE, 16_000)  # a budget asks for budgeted thinking, even where adaptive exists
    assert plan.request == {"type": "enabled", "budget_tokens": 4096} and plan.max_tokens == 20_096
    plan = plan_thinking(60_000, BUDGETED, 16_000)
    assert plan.max_tokens == 64_000 and plan.request == {"type": "enabled", "budget_tokens": 60_000}
    assert plan.note is None


def test_a_budget_past_the_output_cap_is_fitted_under_it_and_said():
    small = ModelInfo("claude-small", max_output=8_192, thinking=True)
    plan = plan_thinking(20_000, small, 16_000)
    assert plan.request == {"type": "enabled", "budget_tokens": 4096} and plan.max_tokens == 8_192
    assert plan.note == ("a thinking budget of 20,000 tokens does not fit under claude-small's output cap of 8,192 "
                         "tokens: thinking with 4,096")
    tiny = ModelInfo("claude-tiny", max_output=1_500, thinking=True)
    plan = plan_thinking(2048, tiny, 16_000)
    assert plan.request is None and "too few for the smallest thinking budget (1,024)" in plan.note


def test_a_budget_for_a_model_without_thinking_says_so():
    plan = plan_thinking(2048, NONE, 16_000)
    assert plan.request is None
    assert plan.note.startswith("a thinking budget of 2,048 tokens was asked for, but claude-old does not support")


def test_off_is_off():
    plan = plan_thinking("off", ADAPTIVE, 16_000)
    assert plan.request is None and plan.max_tokens == 16_000 and plan.note is None
