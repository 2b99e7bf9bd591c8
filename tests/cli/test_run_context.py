"""`decode run` on a session whose tool output adds up to three times the model's window, on every
sandbox backend: the real console script and SDK against the fake Messages API enforcing a small
window (its Models API reporting it, no server-side context management)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import git
from tests.fakes.anthropic_api import FakeAnthropic
from tests.sandbox.conftest import MODES, require
from tests.support.cli import SESSION, buggy_repo, decode_run, printed  # noqa: F401 (fixture)

WINDOW = 30_000  # the fake's tokens: a block costs len(json.dumps(block)) // 4


def loud(step: int) -> list[dict]:
    """A turn whose bash command prints 200 distinct lines (about 16 KB)."""
    command = f"seq -f 'step {step} line %g: the quick brown fox jumps over the lazy dog' 1 200"
    return [{"type": "text", "text": f"Reading log {step}."}, {"type": "tool_use", "name": "bash",
                                                                 "input": {"command": command}}]


@pytest.mark.parametrize("mode", MODES)
def test_a_session_three_windows_long_runs_to_its_fix_within_the_window(tmp_path, buggy_repo, mode):
    require(mode)
    with FakeAnthropic(window=WINDOW) as fake:
        fake.script([loud(i) for i in range(30)] + SESSION["turns"])
        res = decode_run(fake, tmp_path, buggy_repo, SESSION["task"], mode)
    assert res.returncode == 0, res.stderr
    branch = printed(res.stdout, "branch")
    assert git(buggy_repo, "diff", "--name-only", "main", branch) == "calendar_utils.py"  # the fix, committed
    events = [json.loads(line) for line in Path(printed(res.stdout, "transcript (jsonl)")).read_text().splitlines()]
    output = sum(len(json.dumps(e["output"])) // 4 for e in events if e["type"] == "tool_result")
    trims = [e for e in events if e["type"] == "context_trim"]
    assert output >= 3 * WINDOW and len(trims) >= 3
    assert max(fake.prompt_sizes) <= WINDOW and all(r.status == 200 for r in fake.requests)
    assert fake.cache_read_share > 0.5
    assert f"{len(trims)} context trims" in printed(res.stdout, "figures")
    assert "old tool results trimmed (~" in res.stderr  # progress for a person watching
    assert "**context trimmed**" in Path(printed(res.stdout, "transcript")).read_text()
    print(f"{mode}: {len(trims)} trims, largest prompt {max(fake.prompt_sizes):,} of {WINDOW:,}, "
          f"cache reads {fake.cache_read_share:.1%}, tool output ~{output:,} tokens")
