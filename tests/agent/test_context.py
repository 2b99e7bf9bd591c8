"""The trimming policy (bot/agent/context.py) on conversations built by hand: what it trims, what it never
trims, that the tool_use / tool_result pairs stay valid, and that it trims in batches."""

import copy
import json

from bot.agent.context import NOTE_PREFIX, SUMMARY_HEAD, Context
from bot.agent.tools import DEFAULT_TOOLS
from tests.fakes.anthropic_rules import validate

SYSTEM = "You are careful."
TASK = "Fix the failing tests."


def exchange(i, output, text=""):
    """One assistant turn running `bash` and its tool result of `output`."""
    use = {"type": "tool_use", "id": f"toolu_{i}", "name": "bash", "input": {"command": f"pytest -q -k case{i}"}}
    said = [{"type": "text", "text": text}] if text else []
    return [{"role": "assistant", "content": said + [use]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": output}]}]


def conversation(turns, size=6_000, text=""):
    messages = [{"role": "user", "content": TASK}]
    for i in range(turns):
        messages += exchange(i, f"case {i}: " + "x" * size, text)
    return messages


def context(window=40_000):
    return Context.of(window, window // 4, SYSTEM, DEFAULT_TOOLS.schemas)


def never(text, budget):
    raise AssertionError("no summary expected")


def assert_valid(messages):
    validate({"model": "m", "max_tokens": 1, "tools": DEFAULT_TOOLS.schemas, "messages": messages})


def test_a_conversation_under_the_threshold_is_left_alone():
    messages = conversation(3)
    before = copy.deepcopy(messages)
    assert context().fit(messages, never) == [] and messages == before


def test_old_tool_results_become_notes_oldest_first_and_the_latest_turn_stays_whole():
    ctx, messages = context(), conversation(12)
    original = copy.deepcopy(messages)
    [trim] = ctx.fit(messages, never)
    assert trim.kind == "tool_results" and trim.tokens_after <= 0.5 * ctx.room < trim.tokens_before
    assert_valid(messages)
    assert messages[0] == original[0]  # the task
    assert messages[-2:] == original[-2:]  # the latest turn and its results
    notes = [b["content"] for m in messages for b in m["content"] if isinstance(m["content"], list)
             and b.get("type") == "tool_result" and b["content"].startswith(NOTE_PREFIX)]
    assert notes[0] == ("[trimmed to save context: the output of bash `pytest -q -k case0` (6,008 chars); "
                        "run it again if you need it]")
    trimmed = len(notes)
    assert trim.trimmed == [f"bash `pytest -q -k case{i}`" for i in range(trimmed)]
    kept = [b["content"] for m in messages[2 * trimmed + 1:] for b in m["content"] if b.get("type") == "tool_result"]
    assert all(not k.startswith(NOTE_PREFIX) for k in kept)  # oldest first: the newer results are whole
    assert 0 < trimmed < 11


def test_it_trims_in_batches_so_the_prefix_stays_the_same_for_several_turns():
    ctx, messages = context(), conversation(12)
    ctx.fit(messages, never)
    ctx.seen(messages, ctx.estimate(messages))
    quiet = 0
    for i in range(12, 40):
        sent = json.dumps(messages)
        messages += exchange(i, f"case {i}: " + "x" * 6_000)
        if ctx.fit(messages, never):
            break
        assert json.dumps(messages).startswith(sent[:-1])  # only appended to: the cached prefix holds
        ctx.seen(messages, ctx.estimate(messages))
        quiet += 1
    assert quiet >= 3


def test_thinking_blocks_of_the_latest_turn_go_back_unchanged():
    messages = conversation(12)
    thinking = {"type": "thinking", "thinking": "The test fails because...", "signature": "c2lnbmF0dXJl"}
    messages[-2]["content"].insert(0, thinking)
    context().fit(messages, never)
    assert messages[-2]["content"][0] == thinking


def test_when_notes_are_not_enough_the_older_turns_become_a_summary_after_the_task():
    ctx, asked = context(), []
    messages = conversation(14, size=100, text="I think " + "y" * 6_000)  # small results: notes save nothing

    def summarise(text, budget):
        asked.append((text, budget))
        return "Ran the tests; case 3 fails in parse()."

    latest = copy.deepcopy(messages[-2:])
    trims = ctx.fit(messages, summarise)
    assert [t.kind for t in trims] == ["summary"] and trims[0].summary.startswith("Ran the tests")
    [(text, budget)] = asked
    assert text.startswith(f"The task:\n{TASK}") and "pytest -q -k case0" in text and 256 <= budget <= 2_000
    summary = SUMMARY_HEAD + "Ran the tests; case 3 fails in parse()."
    assert messages[0]["content"] == [{"type": "text", "text": TASK}, {"type": "text", "text": summary}]
    assert messages[-2:] == latest and messages[1]["role"] == "assistant"
    assert_valid(messages)
    assert trims[0].dropped == 29 - len(messages)  # as few older turns as bring it under the target
    assert sum(m["role"] == "assistant" for m in messages) > 1
    assert ctx.estimate(messages) <= 0.5 * ctx.room


def test_prompt_too_long_trims_harder_each_time_until_nothing_is_left():
    ctx = context(window=1_000_000)  # the estimate sees no need: the API said otherwise
    messages = conversation(4)
    first = ctx.shrink(messages, never)
    assert first.kind == "tool_results" and len(first.trimmed) == 3  # every older result at once
    second = ctx.shrink(messages, lambda text, budget: "the story so far")
    assert second.kind == "summary" and len(messages) == 3  # the task with the summary, the latest turn
    assert_valid(messages)
    assert ctx.shrink(messages, never) is None  # nothing is left: the caller ends the run


def test_the_estimate_is_exact_for_what_was_sent_and_conservative_for_what_came_after():
    ctx, messages = context(), conversation(2)
    ctx.seen(messages, 5_000)
    assert ctx.estimate(messages) == 5_000
    added = exchange(9, "z" * 3_000)
    messages += added
    grown = len(json.dumps(messages)) - len(json.dumps(messages[:-2]))
    assert abs(ctx.estimate(messages) - (5_000 + grown / 3)) <= 1


def test_where_the_api_clears_results_the_harness_moves_keep_in_batches_and_trims_nothing_itself():
    ctx = Context.of(40_000, 10_000, SYSTEM, DEFAULT_TOOLS.schemas, frozenset({"clear_tool_uses_20250919"}))
    messages = conversation(4, size=15_000)
    ctx.seen(messages, ctx.estimate(messages))
    edit = ctx.management(messages)["edits"][0]
    assert edit["type"] == "clear_tool_uses_20250919" and edit["keep"] == {"type": "tool_uses", "value": 4}
    assert edit["trigger"] == {"type": "input_tokens", "value": 15_000}  # half the room: below the window
    messages += exchange(9, "y" * 15_000)
    before = copy.deepcopy(messages)
    assert ctx.fit(messages, never) == [] and messages == before  # the conversation stays whole
    keep = ctx.management(messages)["edits"][0]["keep"]["value"]
    assert 1 <= keep < 5  # the oldest results go, the latest turn's stays
    assert ctx.estimate(messages) <= 0.5 * ctx.room
    edits = [{"type": "clear_tool_uses_20250919", "cleared_tool_uses": 5 - keep, "cleared_input_tokens": 5_000}]
    trim = ctx.seen(messages, 12_000, edits)
    assert (trim.kind, trim.cleared, trim.tokens_before, trim.tokens_after) == ("server", 5 - keep, 17_000, 12_000)
    assert trim.trimmed[0] == "bash `pytest -q -k case0`"
    assert ctx.seen(messages, 12_100, edits) is None  # the same clearing again is no new trim
    assert ctx.management(messages)["edits"][0]["keep"]["value"] == keep  # and the next request asks the same


def test_without_the_capability_no_request_asks_the_api_to_clear():
    assert context().management(conversation(3)) is None
