"""The transcript: redacted JSON lines that survive a crash, and the Markdown a reviewer reads."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bot.model import Usage
from bot.core.redact import Redactor
from bot.run.transcript import Transcript, figures, load_events, render_markdown, stop_reason

TOKEN = "ghs_" + "Zz9" * 12


def record_run(directory: Path, *, end: bool = True) -> Transcript:
    """A two-turn run as the agent loop records it."""
    tr = Transcript(directory, Redactor([TOKEN]))
    tr.record("run_start", task="Fix the greeting, cc @octocat", repo="o/r", model="claude-sonnet-4-5",
              sandbox="local", budget={"max_turns": 10}, branch="decode/issue-1-greet", base="main")
    tr.record("model_request", turn=1, system="You are...", tools=["bash", "edit"], max_tokens=8000,
              new_messages=[{"role": "user", "content": "Fix the greeting in hello.py"}])
    tr.record("model_response", turn=1, stop_reason="tool_use", cost_usd=0.0123, duration_s=2.5, request_id="req_1",
              usage=Usage(1000, 50, 200, 300),
              content=[{"type": "text", "text": "Let me look. Fixes #12, thanks @octocat; see <details> and `a<b`."},
                       {"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": "cat hello.py"}},
                       {"type": "tool_use", "id": "t2", "name": "edit",
                        "input": {"path": "hello.py", "old_string": "a\nprint('helo')\nb",
                                  "new_string": "a\nprint('hello')\nb"}}])
    tr.record("tool_call", turn=1, id="t1", name="bash", input={"command": "cat hello.py"})
    tr.record("tool_call", turn=1, id="t2", name="edit",
              input={"path": "hello.py", "old_string": "a\nprint('helo')\nb", "new_string": "a\nprint('hello')\nb"})
    tr.record("tool_result", turn=1, id="t1", name="bash", output="```\nprint('helo')\n````\n" + TOKEN,
              is_error=False, duration_s=0.1)
    tr.record("tool_result", turn=1, id="t2", name="edit", output="edited hello.py", is_error=False, duration_s=0.01)
    tr.record("note", text="network turned off")
    tr.record("model_request", turn=2, system="You are...", tools=["bash", "edit"], max_tokens=8000,
              new_messages=[{"role": "user",
                             "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]}])
    tr.record("model_response", turn=2, stop_reason="end_turn", cost_usd=0.01, duration_s=1.0, request_id="req_2",
              usage={"input_tokens": 10, "output_tokens": 20, "cache_read_tokens": 1200, "cache_creation_tokens": 0},
              content=[{"type": "text", "text": "Done."}])
    if end:
        tr.record("run_end", stop_reason="completed", summary="Fixed the typo in `hello.py`.", turns=2,
                  usage={"input_tokens": 1010, "output_tokens": 70, "cache_read_tokens": 1400,
                         "cache_creation_tokens": 300},
                  cost_usd=0.0223, wall_s=125.0, error=None)
    return tr


def test_events_are_json_lines_with_type_time_and_fields(tmp_path: Path) -> None:
    tr = record_run(tmp_path / "run")
    lines = (tmp_path / "run" / "transcript.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    assert [e["type"] for e in events][:3] == ["run_start", "model_request", "model_response"]
    assert all({"type", "t", "at"} <= e.keys() for e in events)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", events[0]["at"])
    assert events[0]["t"] <= events[-1]["t"] < 5
    assert events[2]["usage"] == {"input_tokens": 1000, "output_tokens": 50, "cache_read_tokens": 200,
                                  "cache_creation_tokens": 300}
    assert load_events(tr.path) == events
    tr.close()


def test_every_line_is_flushed_before_close(tmp_path: Path) -> None:
    tr = Transcript(tmp_path, Redactor())
    tr.record("note", text="one")
    assert json.loads((tmp_path / "transcript.jsonl").read_text())["text"] == "one"  # no close() yet
    tr.close()
    tr.close()
    with pytest.raises(ValueError, match="closed"):
        tr.record("note", text="late")


def test_secrets_never_reach_the_disk(tmp_path: Path) -> None:
    record_run(tmp_path).close()
    (tmp_path / "transcript.md").write_text(render_markdown(load_events(tmp_path / "transcript.jsonl")))
    for name in ("transcript.jsonl", "transcript.md"):
        text = (tmp_path / name).read_text()
        assert TOKEN not in text and "[REDACTED:secret]" in text


def test_reserved_fields_are_refused(tmp_path: Path) -> None:
    with Transcript(tmp_path, Redactor()) as tr, pytest.raises(ValueError, match="reserved"):
        tr.record("note", t=1)


def test_a_torn_last_line_is_skipped(tmp_path: Path) -> None:
    with Transcript(tmp_path, Redactor()) as tr:
        tr.record("note", text="kept")
    with open(tr.path, "a") as f:
        f.write('{"type": "note", "te')
    assert [e["text"] for e in load_events(tr.path)] == ["kept"]


def test_markdown_has_figures_turns_calls_results_and_summary(tmp_path: Path) -> None:
    tr = record_run(tmp_path)
    md = tr.write_markdown().read_text()
    tr.close()
    assert md.startswith("# decode-bot transcript\n")
    assert "| 2 | 1,010 | 70 | 1,400 | 300 | 0 | $0.02 | 2m 05s | completed |" in md
    assert "repo `o/r`" in md and "model `claude-sonnet-4-5`" in md
    order = ["## Turn 1", "```bash\ncat hello.py\n```", "## Turn 2", "## Summary"]
    assert [md.index(x) for x in order] == sorted(md.index(x) for x in order)
    assert "```diff\n a\n-print('helo')\n+print('hello')\n b\n```" in md
    assert "edited hello.py" in md and "> **note:** network turned off" in md
    assert "Fixed the typo in `hello.py`." in md
    assert md.count("<details><summary>prompt</summary>") == 1  # tool results are not repeated as user messages


def test_tool_output_cannot_break_out_of_its_fence(tmp_path: Path) -> None:
    md = record_run(tmp_path).write_markdown().read_text()
    block = re.search(r"\n(`{5,})text\n(.*?)\n\1\n", md, re.DOTALL)
    assert block is not None and block.group(2).startswith("```\nprint('helo')\n````")


def test_model_prose_cannot_ping_close_or_inject_html(tmp_path: Path) -> None:
    md = record_run(tmp_path).write_markdown().read_text()
    turn1 = md[md.index("## Turn 1") :]
    prose = turn1.split("\n\n")[2]
    assert "@octocat" not in prose and "@\u2060octocat" in prose
    assert "Fixes #12" not in prose and "<details>" not in prose and "&lt;details>" in prose
    assert "`a<b`" in prose  # code spans are left alone
    assert "cc @octocat" in md  # the task is quoted in a fence, verbatim


def test_figures_of_a_run_that_never_ended(tmp_path: Path) -> None:
    tr = record_run(tmp_path, end=False)
    events = tr.events()
    figs = figures(events)
    assert figs.turns == 2 and figs.usage.input_tokens == 1010 and figs.usage.cache_read_tokens == 1400
    assert stop_reason(events) == "incomplete" and figs.cost_usd == pytest.approx(0.0223)
    assert "| incomplete |" in render_markdown(events)


def test_context_trims_render_with_what_went_and_are_counted(tmp_path: Path) -> None:
    with Transcript(tmp_path, Redactor()) as tr:
        tr.record("context_trim", turn=9, reason="estimate", kind="tool_results", window=30_000,
                  trimmed=["bash `pytest -q`", "read `src/app.py`"], tokens_before=18_000, tokens_after=9_000)
        tr.record("model_request", turn=10, system="Summarise.", purpose="context_summary", max_tokens=2000,
                  new_messages=[{"role": "user", "content": "The task:\nthe whole history"}], tools=[])
        tr.record("model_response", turn=10, purpose="context_summary", stop_reason="end_turn", usage={},
                  cost_usd=0.01, duration_s=1, content=[{"type": "text", "text": "Found the bug; cc @octocat"}])
        tr.record("context_trim", turn=10, reason="prompt_too_long", kind="summary", window=30_000,
                  trimmed=["4 earlier turns (8 messages)"], tokens_before=20_000, tokens_after=6_000,
                  summary="Found the bug; cc @octocat")
        events = tr.events()
    md = render_markdown(events)
    assert figures(events).trims == 2 and "| 2 | $0.01 |" in md
    assert ("> **context trimmed** (the next prompt would have passed 80% of the room): old tool results replaced "
            "by notes, ~18,000 → ~9,000 tokens of a 30,000-token window\n> - bash `pytest -q`") in md
    assert "## Turn 10: a summary of the older turns, to save context" in md
    assert "(the API answered \"prompt is too long\"): older turns summarised" in md
    assert md.count("Found the bug") == 1 and "cc @\u2060octocat" in md  # once, as the model's prose
    assert "the whole history" not in md  # the summariser's prompt repeats the older turns: not shown again


def test_tool_uses_without_call_events_and_errors_render(tmp_path: Path) -> None:
    with Transcript(tmp_path, Redactor()) as tr:
        tr.record("model_response", turn=1, stop_reason="tool_use", usage={}, cost_usd=0, duration_s=1,
                  content=[{"type": "tool_use", "id": "a", "name": "read", "input": {"path": "x.py", "offset": 3}},
                           {"type": "tool_use", "id": "b", "name": "mystery", "input": {"k": "v"}}])
        tr.record("tool_result", turn=1, id="a", name="read", output="no such file", is_error=True, duration_s=0)
        tr.record("run_end", stop_reason="max_turns", summary="", turns=1, usage={}, cost_usd=0, wall_s=3,
                  error="budget: 1 turn")
    md = render_markdown(tr.events())
    assert "**read** `x.py` from line 3" in md and "error (0.0s):" in md and "no such file" in md
    assert '**mystery**\n\n```json\n{\n  "k": "v"\n}\n```' in md and "_(no result recorded)_" in md
    assert "budget: 1 turn" in md and "| max_turns |" in md


def test_long_blocks_can_be_shortened() -> None:
    events = [{"type": "tool_call", "id": "x", "name": "bash", "input": {"command": "y" * 5000}, "t": 0}]
    md = render_markdown(events, max_block_chars=100)
    assert "characters not shown" in md and len(md) < 1000


def test_setup_events_and_a_pipeline_error_after_the_loop(tmp_path: Path) -> None:
    with Transcript(tmp_path, Redactor()) as tr:
        tr.record("run_start", task="t", repo="/r", branch="b", base_sha="0123456789abcdef" * 2, model="m",
                  sandbox="local", budget={})
        tr.record("setup", command="pip install -e .", exit_code=0, output="ok", timed_out=False, duration_s=3.0)
        tr.record("model_response", turn=1, content=[{"type": "text", "text": "All done."}], stop_reason="end_turn",
                  usage={"input_tokens": 5, "output_tokens": 6}, cost_usd=0.5, duration_s=1)
        tr.record("run_end", stop_reason="completed", summary="All done.", turns=1,
                  usage={"input_tokens": 5, "output_tokens": 6, "cache_read_tokens": 0, "cache_creation_tokens": 0},
                  cost_usd=0.5, wall_s=9.0, error=None)
        tr.record("run_end", stop_reason="error", summary="", error="refused: leak is a symlink to /etc/passwd")
    md = render_markdown(tr.events())
    assert "base `0123456789ab`" in md
    assert "**setup** (exit 0, 3.0s)\n\n```bash\npip install -e .\n```\n\n```text\nok\n```" in md
    assert "| 1 | 5 | 6 | 0 | 0 | 0 | $0.50 |" in md and "| error |" in md
    assert md.count("## Summary") == 1 and "## Error\n\n```text\nrefused: leak is a symlink" in md
