"""Where the model has the API's context editing (`clear_tool_uses_20250919`, by its Models API), the API clears
old tool results itself: the real client against the fake Messages API enforcing a small window and applying
the edit as the API does (tests/fakes/anthropic_edits.py)."""

import json

from bot.run.transcript import render_markdown
from tests.agent.test_context_window import DONE, WINDOW, loud, run, three_windows, write
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.anthropic_edits import BETA, PLACEHOLDER

CLEAR = "clear_tool_uses_20250919"


def test_three_windows_of_tool_output_run_to_the_fix_with_the_api_clearing_old_results(repo_factory, tmp_path):
    fake, result, events, output = three_windows(repo_factory, tmp_path, context_edits={CLEAR})
    # every request asks for the edit through the beta API; the client's history stays whole
    assert all(BETA in r.headers.get("anthropic-beta", "") and r.body["context_management"]["edits"][0]["type"]
               == CLEAR for r in fake.requests)
    last = fake.requests[-1].body
    assert "step 0 line 200" in json.dumps(last) and PLACEHOLDER not in json.dumps(last)
    trims = [e for e in events if e["type"] == "context_trim"]
    server = [t for t in trims if t["kind"] == "server"]
    assert len(trims) == result.trims == events[-1]["trims"] and len(server) >= 3
    assert server == trims  # the harness never had to trim on its side
    assert all(t["reason"] == "context_editing" and t["tokens_after"] < t["tokens_before"] for t in server)
    applied = [r["context_management"]["applied_edits"] for r in fake.replies]
    cleared = [a[0]["cleared_tool_uses"] for a in applied if a]
    assert [t["cleared_tool_uses"] for t in server] == sorted(set(cleared))  # a trim when the API clears more
    assert len(server[0]["trimmed"]) == server[0]["cleared_tool_uses"]
    assert server[0]["trimmed"][0].startswith("bash `seq -f 'step 0 line %g")
    page = render_markdown(events)
    assert "**context trimmed** (by the API's context editing): the API cleared the results of" in page
    print(f"{len(server)} trims by the API, {len(trims) - len(server)} by the harness, "
          f"largest prompt {max(fake.prompt_sizes):,} "
          f"of {WINDOW:,}, cache reads {fake.cache_read_share:.1%}, tool output ~{output:,} tokens")


def test_without_the_capability_requests_carry_no_edit_and_the_harness_trims(repo_factory, tmp_path):
    repo = repo_factory({"a.txt": "one\n"})
    with FakeAnthropic(window=WINDOW) as fake:
        fake.script([loud(i, lines=100) for i in range(12)] + [DONE])
        result, events = run(fake, repo, tmp_path)
    assert result.completed and result.trims >= 1
    assert all("context_management" not in r.body and "anthropic-beta" not in r.headers for r in fake.requests)
    assert {e["kind"] for e in events if e["type"] == "context_trim"} == {"tool_results"}


def test_when_clearing_results_frees_too_little_the_harness_still_summarises(repo_factory, tmp_path):
    repo = repo_factory({"a.txt": "one\n"})
    summary = [{"type": "text", "text": "Wrote parts 0 to 4 of the notes under notes/."}]
    with FakeAnthropic(window=WINDOW, context_edits={CLEAR}) as fake:
        fake.script([write(i) for i in range(8)] + [summary] + [write(i) for i in range(8, 11)] + [DONE])
        result, events = run(fake, repo, tmp_path)
    assert result.completed and (repo / "notes/part10.txt").exists()
    assert max(fake.prompt_sizes) <= WINDOW and all(r.status == 200 for r in fake.requests)
    assert [e["kind"] for e in events if e["type"] == "context_trim"] == ["summary"]
