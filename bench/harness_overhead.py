"""Harness overhead per agent turn, with the scripted model and the local sandbox.

    python3 bench/harness_overhead.py [--turns 200] [--rounds 5]

Each turn asks the scripted model (no network), runs one cheap tool call in the
sandbox, records transcript events (with redaction) and grows the conversation.
The harness overhead is a turn's wall time minus the time spent inside the
sandbox call, which is measured in the same run; the baseline line shows a
bare `Sandbox.run("true")` for scale. Target (issue 2): <= 20 ms per turn.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.agent.loop import run_agent  # noqa: E402
from bot.config import Budget  # noqa: E402
from bot.model.scripted import ScriptedModel  # noqa: E402
from bot.core.redact import Redactor  # noqa: E402
from bot.sandbox import SandboxSpec, open_sandbox  # noqa: E402
from bot.run.transcript import Transcript, load_events  # noqa: E402

TARGET_MS = 20.0


def one_round(workspace: Path, turns: int) -> tuple[float, float]:
    """(ms per turn, ms of sandbox time per turn) for one scripted session."""
    script = [[{"type": "text", "text": f"step {i}"},
               {"type": "tool_use", "name": "bash", "input": {"command": "true"}}] for i in range(turns - 1)]
    script.append([{"type": "text", "text": "done"}])
    sandbox = open_sandbox("local", SandboxSpec(workspace=workspace))
    run_dir = Path(tempfile.mkdtemp(prefix="decode-bench-run-"))
    redactor = Redactor(["sk-ant-api03-benchmarksecret0123456789", "ghp_benchmarkTokenValue0123456789abcdef"])
    try:
        with Transcript(run_dir, redactor) as transcript:
            start = time.perf_counter()
            result = run_agent(model=ScriptedModel(script), sandbox=sandbox, system="system prompt " * 200,
                               task="task", budget=Budget(max_turns=turns + 1), recorder=transcript,
                               redact=redactor.redact)
            total = time.perf_counter() - start
        assert result.completed, result.summary
        in_sandbox = sum(e["duration_s"] for e in load_events(transcript.path) if e["type"] == "tool_result")
    finally:
        sandbox.close()
        shutil.rmtree(run_dir, ignore_errors=True)
    return total / turns * 1000, in_sandbox / turns * 1000


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    workspace = Path(tempfile.mkdtemp(prefix="decode-bench-ws-"))
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    per_turn, sandbox_ms, bare = [], [], []
    sb = open_sandbox("local", SandboxSpec(workspace=workspace))
    for _ in range(args.rounds):
        t, s = one_round(workspace, args.turns)
        per_turn.append(t)
        sandbox_ms.append(s)
        for _ in range(50):
            began = time.perf_counter()
            sb.run("true")
            bare.append((time.perf_counter() - began) * 1000)
    sb.close()
    shutil.rmtree(workspace, ignore_errors=True)
    turn, inside = statistics.median(per_turn), statistics.median(sandbox_ms)
    overhead = turn - inside
    print(f"turns per session: {args.turns}, rounds: {args.rounds}")
    print(f"baseline: bare Sandbox.run('true')     {statistics.median(bare):7.2f} ms")
    print(f"wall time per turn                     {turn:7.2f} ms")
    print(f"  of which inside the sandbox call      {inside:7.2f} ms")
    print(f"harness overhead per turn              {overhead:7.2f} ms  "
          f"({overhead / statistics.median(bare):.1f}x the bare call; target <= {TARGET_MS:.0f} ms: "
          f"{'ok' if overhead <= TARGET_MS else 'OVER TARGET'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
