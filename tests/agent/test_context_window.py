"""A conversation that never passes the model's window: the real client against the fake Messages API
enforcing a small window (its Models API reporting it, no server-side context management)."""

import json
import threading

from bot.agent.loop import run_agent
from bot.config import Budget
from bot.core.redact import Redactor
from bot.model.anthropic import AnthropicModel
from bot.run.transcript import Transcript, load_events
from bot.sandbox import SandboxSpec, open_sandbox
from tests.fakes.anthropic_api import FakeAnthropic

WINDOW = 30_000  # the fake's tokens: a block costs len(json.dumps(block)) // 4
TOO_LONG = "prompt is too long: 210000 tokens > 200000 maximum"


def loud(step, lines=200):
    """A turn whose bash command prints `lines` distinct lines (about 16 KB at 200)."""
    command = f"seq -f 'step {step} line %g: the quick brown fox jumps over the lazy dog' 1 {lines}"
    return [{"type": "text", "text": f"Step {step}."},
            {"type": "tool_use", "name": "bash", "input": {"command": command}}]


DONE = [{"type": "text", "text": "Done."}]


def run(fake, repo, tmp_path, system="You are a careful engineer. " * 40):
    sandbox = open_sandbox("local", SandboxSpec(workspace=repo))
    try:
        with Transcript(tmp_path / "run", Redactor()) as transcript:
            result = run_agent(model=AnthropicModel(fake.settings().model, sleep=lambda s: None), sandbox=sandbox,
                               system=system, task="Read the logs.", budget=Budget(), recorder=transcript)
    finally:
        sandbox.close()
    return result, load_events(transcript.path)


def three_windows(repo_factory, tmp_path, context_edits=None):
    """Thirty turns of loud tool output, about three windows of it, run to "Done." against the fake with a small
    window and `context_edits` (the API's context editing) or none: what both kinds of trimming must keep (every
    prompt within the window, the cache still read) is checked here. The fake, result, events and the tokens
    of tool output."""
    repo = repo_factory({"a.txt": "one\n"})
    with FakeAnthropic(window=WINDOW, context_edits=context_edits) as fake:
        fake.script([loud(i) for i in range(30)] + [DONE])
        result, events = run(fake, repo, tmp_path)
    assert result.completed and result.summary == "Done."
    output = sum(len(json.dumps(e["output"])) // 4 for e in events if e["type"] == "tool_result")
    assert output >= 3 * WINDOW
    assert max(fake.prompt_sizes) <= WINDOW and all(r.status == 200 for r in fake.requests)
    assert fake.cache_read_share > 0.5
    return fake, result, events, output


def test_three_windows_of_tool_output_fit_a_small_window_and_the_cache_still_reads(repo_factory, tmp_path):
    fake, result, events, output = three_windows(repo_factory, tmp_path)
    trims = [e for e in events if e["type"] == "context_trim"]
    assert len(trims) == result.trims >= 3 and {t["kind"] for t in trims} == {"tool_results"}
    assert all(t["tokens_after"] < t["tokens_before"] and t["window"] == WINDOW for t in trims)
    assert events[-1]["trims"] == result.trims
    # the model is told what it lost and how to get it back
    last = json.dumps(fake.requests[-1].body)
    assert "[trimmed to save context: the output of bash `seq -f 'step 0 line %g" in last
    assert "run it again if you need it]" in last and "step 29 line 200" in last
    print(f"{result.trims} trims, largest prompt {max(fake.prompt_sizes):,} of {WINDOW:,}, "
          f"cache reads {fake.cache_read_share:.1%}, tool output ~{output:,} tokens")


def test_a_prompt_too_long_answer_mid_run_trims_and_the_run_goes_on(fake_anthropic, repo_factory, tmp_path):
    repo = repo_factory({"a.txt": "one\n"})
    fake_anthropic.script([loud(i, lines=40) for i in range(5)] + [DONE])
    held = fake_anthropic.pause(3)  # the fourth request: two older tool results to trim, the latest kept
    outcome = {}
    runner = threading.Thread(target=lambda: outcome.update(zip(("result", "events"), run(fake_anthropic, repo,
                                                                                           tmp_path))))
    runner.start()
    assert held.reached.wait(60)
    fake_anthropic.inject(400, message=TOO_LONG, error_type="invalid_request_error")
    held.release(drop=False)
    runner.join(60)
    result, events = outcome["result"], outcome["events"]
    assert result.completed and result.summary == "Done." and result.trims == 1
    assert [r.status for r in fake_anthropic.requests] == [200, 200, 200, 400, 200, 200, 200]
    [trim] = [e for e in events if e["type"] == "context_trim"]
    assert trim["reason"] == "prompt_too_long" and trim["kind"] == "tool_results" and len(trim["trimmed"]) == 2
    retried = json.dumps(fake_anthropic.requests[4].body)
    assert retried.count("[trimmed to save context") == 2 and "step 2 line 40" in retried


def test_a_prompt_too_long_with_nothing_left_to_trim_ends_the_run_saying_so(fake_anthropic, repo_factory, tmp_path):
    repo = repo_factory({"a.txt": "one\n"})
    fake_anthropic.script([DONE]).inject(400, message=TOO_LONG, error_type="invalid_request_error")
    result, events = run(fake_anthropic, repo, tmp_path)
    assert result.stop_reason == "error" and result.exit_code == 1
    assert TOO_LONG in result.error and "nothing is left to trim" in result.error


def write(part):
    """A turn writing a large file: its input is large, its result ("wrote ...") is small."""
    content = f"part {part}: " + "lorem ipsum dolor sit amet " * 300
    return [{"type": "text", "text": f"Writing part {part}."},
            {"type": "tool_use", "name": "write", "input": {"path": f"notes/part{part}.txt", "content": content}}]


def test_when_notes_do_not_free_enough_the_model_summarises_the_older_turns(repo_factory, tmp_path):
    repo = repo_factory({"a.txt": "one\n"})
    summary = [{"type": "text", "text": "Wrote parts 0 to 4 of the notes under notes/."}]
    with FakeAnthropic(window=WINDOW) as fake:
        # the 9th request is the summary's (the scripted session knows where it falls)
        fake.script([write(i) for i in range(8)] + [summary] + [write(i) for i in range(8, 11)] + [DONE])
        result, events = run(fake, repo, tmp_path)
    assert result.completed and result.summary == "Done." and result.turns == 13  # the summary counts as a turn
    assert (repo / "notes/part10.txt").exists()
    assert max(fake.prompt_sizes) <= WINDOW
    [trim] = [e for e in events if e["type"] == "context_trim"]
    assert trim["kind"] == "summary" and trim["summary"] == summary[0]["text"] and result.trims == 1
    assert trim["trimmed"] == ["5 earlier turns (10 messages)"]
    [asked] = [e for e in events if e["type"] == "model_request" and e.get("purpose") == "context_summary"]
    prompt = asked["new_messages"][0]["content"]
    assert asked["tools"] == [] and prompt.startswith("The task:\nRead the logs.") and "notes/part4.txt" in prompt
    [answer] = [e for e in events if e["type"] == "model_response" and e.get("purpose") == "context_summary"]
    assert answer["usage"]["output_tokens"] > 0 and answer["cost_usd"] > 0  # counted like any turn
    first = fake.requests[-1].body["messages"][0]["content"]
    assert first[0]["text"] == "Read the logs." and first[1]["text"].endswith(summary[0]["text"])
    assert fake.requests[-1].body["messages"][1]["content"][0]["text"] == "Writing part 5."  # the newer turns stay
