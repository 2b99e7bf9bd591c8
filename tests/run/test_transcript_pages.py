"""A transcript indexed once and read a page at a time: the same figures as the whole file, pages of whole
turns, and a growing file read from where the index stopped."""

from __future__ import annotations

from bot.core.redact import Redactor
from bot.run.transcript import Transcript, figures, load_events
from bot.run.transcript_pages import PAGE_TURNS, index, read_span


def record_turns(transcript: Transcript, first: int, last: int) -> None:
    """Turns `first`..`last` as the agent loop records them: request, response, a tool call and its result."""
    for n in range(first, last + 1):
        transcript.record("model_request", turn=n, system="s", new_messages=[], tools=["bash"], max_tokens=10)
        transcript.record("model_response", turn=n, content=[{"type": "text", "text": f"turn {n}"}],
                          stop_reason="tool_use", usage={"input_tokens": 10, "output_tokens": 2}, cost_usd=0.5)
        transcript.record("tool_call", turn=n, id=f"c{n}", name="bash", input={"command": "ls"})
        transcript.record("tool_result", turn=n, id=f"c{n}", name="bash", output="a\n" * 50, is_error=False)


def test_pages_are_whole_turns_and_the_figures_are_the_whole_runs(tmp_path):
    with Transcript(tmp_path, Redactor([])) as transcript:
        transcript.record("run_start", task="t", repo="o/r")
        record_turns(transcript, 1, 120)
        transcript.record("run_end", stop_reason="completed", summary="ok", turns=120)
    found = index(transcript.path)
    assert found.pages == 3 and found.tally.figures() == figures(load_events(transcript.path))
    middle = read_span(transcript.path, *found.span(2))
    assert {e["turn"] for e in middle} == set(range(PAGE_TURNS + 1, 2 * PAGE_TURNS + 1))
    last = read_span(transcript.path, *found.span(3))
    assert last[-1]["type"] == "run_end" and last[0]["turn"] == 101


def test_a_growing_file_is_read_from_where_the_index_stopped_and_a_torn_line_waits(tmp_path):
    transcript = Transcript(tmp_path, Redactor([]))
    record_turns(transcript, 1, 3)
    before = index(transcript.path)
    size = before.size
    with open(transcript.path, "a") as f:
        f.write('{"type": "note", "t": 1.0, "at": "x", "te')  # a line being written
    assert index(transcript.path).size == size
    with open(transcript.path, "a") as f:
        f.write('xt": "hi"}\n')
    record_turns(transcript, 4, 4)
    after = index(transcript.path)
    assert after is before and [t for t, _ in after.turns] == [1, 2, 3, 4]  # carried on, not read again
    assert [e["type"] for e in read_span(transcript.path, size, after.turns[-1][1])] == ["note"]
    transcript.close()
