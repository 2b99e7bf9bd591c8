"""ScriptedModel replays sessions and transcripts; bad files name themselves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.config import Settings
from bot.core.errors import ConfigError, DecodeError
from bot.model import make_model, shared_model
from bot.model.anthropic import AnthropicModel
from bot.model.scripted import ScriptedModel

ARGS = {"system": "sys", "messages": [{"role": "user", "content": "fix the bug"}], "tools": [], "max_tokens": 100}
LS = {"type": "tool_use", "name": "bash", "input": {"command": "ls"}}


def write(tmp_path: Path, name: str, data: object) -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_a_json_list_is_replayed_in_order_then_runs_out(tmp_path):
    model = ScriptedModel.load(write(tmp_path, "session.json", [[LS], [{"type": "text", "text": "done"}]]))
    first, second = model.complete(**ARGS), model.complete(**ARGS)
    assert first.stop_reason == "tool_use" and first.tool_uses[0]["input"] == {"command": "ls"}
    assert first.tool_uses[0]["id"].startswith("toolu_")
    assert second.stop_reason == "end_turn" and second.text == "done"
    assert first.usage.input_tokens > 0 and first.usage.output_tokens > 0
    with pytest.raises(DecodeError, match="only 2 turns"):
        model.complete(**ARGS)


def test_turns_object_accepts_content_dicts_and_strings(tmp_path):
    path = write(tmp_path, "session.json", {"turns": [{"content": [LS, {**LS, "id": "toolu_mine"}]}, "all good"]})
    model = ScriptedModel.load(path)
    ids = [b["id"] for b in model.complete(**ARGS).tool_uses]
    assert len(set(ids)) == 2 and "toolu_mine" in ids
    assert model.complete(**ARGS).text == "all good"
    assert model.name == "scripted:session.json"


def test_a_transcript_replays_only_its_model_responses(tmp_path):
    events = [
        {"type": "run_start", "task": "fix"},
        {"type": "model_response", "content": [LS], "usage": {"input_tokens": 9}},
        {"type": "tool_result", "output": "a.py"},
        {"type": "model_response", "content": [{"type": "text", "text": "Fixed a.py"}]},
    ]
    path = write(tmp_path, "run.jsonl", "\n".join(json.dumps(e) for e in events) + "\n\n")
    model = ScriptedModel.load(path)
    assert model.complete(**ARGS).tool_uses[0]["name"] == "bash"
    assert model.complete(**ARGS).text == "Fixed a.py"
    with pytest.raises(DecodeError):
        model.complete(**ARGS)


def test_replies_are_copies_of_the_script(tmp_path):
    model = ScriptedModel([[LS]])
    model.complete(**ARGS).content[0]["input"]["command"] = "rm -rf /"
    assert model.turns[0][0]["input"] == {"command": "ls"}


@pytest.mark.parametrize(
    ("name", "text"),
    [("broken.json", "{not json"), ("no-turns.json", '{"steps": []}'), ("bad.jsonl", '{"type": "model_response"}\n')],
)
def test_an_unreadable_script_is_a_config_error_naming_the_file(tmp_path, name, text):
    path = write(tmp_path, name, text)
    with pytest.raises(ConfigError) as caught:
        ScriptedModel.load(path)
    assert str(path) in str(caught.value) and "DECODE_MODEL" in str(caught.value)


def test_a_missing_file_is_a_config_error_naming_it(tmp_path):
    with pytest.raises(ConfigError, match="missing.json: cannot read the script"):
        ScriptedModel.load(tmp_path / "missing.json")


def test_a_file_of_sessions_replays_the_one_whose_text_the_task_holds(tmp_path):
    path = write(tmp_path, "sessions.json", {"sessions": [{"when": "the pager", "turns": ["pager fixed"]},
                                                          {"when": "the bug", "turns": [[LS], "bug fixed"]}]})
    one, other = ScriptedModel.load(path), ScriptedModel.load(path)
    assert one.complete(**ARGS).stop_reason == "tool_use" and one.complete(**ARGS).text == "bug fixed"
    pager = {**ARGS, "messages": [{"role": "user", "content": [{"type": "text", "text": "Task: fix the pager"}]}]}
    assert other.complete(**pager).text == "pager fixed"
    with pytest.raises(DecodeError, match="no session of scripted:sessions.json matches the task"):
        ScriptedModel.load(path).complete(**{**ARGS, "messages": [{"role": "user", "content": "other"}]})


@pytest.mark.parametrize("sessions", [[], [{"when": "", "turns": []}], [{"when": "x"}], "x"])
def test_a_file_of_malformed_sessions_is_a_config_error_naming_the_file(tmp_path, sessions):
    path = write(tmp_path, "sessions.json", {"sessions": sessions})
    with pytest.raises(ConfigError, match="not a session or transcript file") as caught:
        ScriptedModel.load(path)
    assert str(path) in str(caught.value)


@pytest.mark.parametrize("text", ['"hello"', "5", '[[{"type": "text", "text": "a"}], 7]'])
def test_a_script_of_the_wrong_shape_is_a_config_error_naming_the_file(tmp_path, text):
    path = write(tmp_path, "odd.json", text)
    with pytest.raises(ConfigError) as caught:
        ScriptedModel.load(path)
    assert str(path) in str(caught.value)


def test_make_model_picks_the_scripted_model(tmp_path):
    path = write(tmp_path, "demo.json", ["hello"])
    model = make_model(Settings(model=f"scripted:{path}").model)
    assert isinstance(model, ScriptedModel) and model.complete(**ARGS).text == "hello"


def test_a_process_shares_one_anthropic_client_but_never_a_scripted_session(tmp_path):
    session = tmp_path / "s.json"
    session.write_text(json.dumps({"turns": [[{"type": "text", "text": "done"}]]}))
    assert shared_model(Settings(model=f"scripted:{session}").model) is None  # each run replays it from the start
    assert shared_model(Settings(model="claude-x").model) is None  # no key: each run says what to set, on the issue
    model = shared_model(Settings(model="claude-x", anthropic_api_key="sk-ant-test-0123456789abcdef").model)
    assert isinstance(model, AnthropicModel) and model.name == "claude-x"


def test_thinking_blocks_replay_as_written_and_malformed_ones_name_the_turn(tmp_path):
    thinking = {"type": "thinking", "thinking": "ls first", "signature": "c2ln"}
    model = ScriptedModel.load(write(tmp_path, "s.json", [[thinking, {"type": "redacted_thinking", "data": "x"}, LS]]))
    assert model.complete(**ARGS, thinking={"type": "adaptive"}).content[:2] == [
        thinking, {"type": "redacted_thinking", "data": "x"}]
    with pytest.raises(ConfigError, match=r"turn 1, block 1: a thinking block needs a string `thinking`"):
        ScriptedModel([[{"type": "thinking", "signature": "c2ln"}]])
    with pytest.raises(ConfigError, match=r"turn 2, block 1: a redacted_thinking block needs a string `data`"):
        ScriptedModel([[LS], [{"type": "redacted_thinking"}]])
