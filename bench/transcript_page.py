"""The run page of a long run: render time and peak memory for 50, 500 and 5,000 turns (issue 38).

    python3 bench/transcript_page.py [--turns 50,500,5000] [--rounds 5] [--smoke]

Each transcript is written by the real recorder (`Transcript.record`): per turn a request, a response with
some prose, a bash call and a 2 KB result. The page is asked of the real Flask app (GET /runs/<id> with a
signed link): the first ask indexes the file (cold), later asks reuse the index (warm); a live poll with
nothing new and one with one new turn are timed too. The baseline, in the same run, is the page as it was
before: the whole transcript loaded and rendered as one HTML string. Target: 5,000 turns within 1 s.
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._scale import Table, command_line, ratio, target  # noqa: E402
from bot.core.redact import Redactor  # noqa: E402
from bot.github.links import run_path  # noqa: E402
from bot.run.result import RunResult, write_record  # noqa: E402
from bot.run.transcript import JSONL_NAME, Transcript, load_events, render_markdown  # noqa: E402
from bot.server.render import MAX_BLOCK_CHARS, markdown_html  # noqa: E402
from bot.jobs.sqlite import Store  # noqa: E402
from tests.support.runs import web_app  # noqa: E402

TARGET_S = 1.0


def write_turns(transcript: Transcript, first: int, last: int) -> None:
    """Turns `first`..`last` as the agent loop records them."""
    for n in range(first, last + 1):
        transcript.record("model_request", turn=n, system="", new_messages=[], tools=["bash"], max_tokens=8000)
        transcript.record("model_response", turn=n, content=[
            {"type": "text", "text": f"Turn {n}: looking at the failing test and the parser around it. " * 3},
            {"type": "tool_use", "id": f"c{n}", "name": "bash", "input": {"command": f"pytest -k case_{n}"}}],
            stop_reason="tool_use", usage={"input_tokens": 5000, "output_tokens": 200}, cost_usd=0.02,
            duration_s=2.5)
        transcript.record("tool_call", turn=n, id=f"c{n}", name="bash", input={"command": f"pytest -k case_{n}"})
        transcript.record("tool_result", turn=n, id=f"c{n}", name="bash", is_error=False, duration_s=1.0,
                          output="".join(f"tests/test_parser.py::case_{n}_{i} PASSED\n" for i in range(40)))


def measured(fn: Callable[[], object], again: Callable[[], object] | None = None) -> tuple[float, float]:
    """(seconds of one call of `fn`, peak MB of Python allocations of one call of `again`, default `fn`):
    apart, since tracing allocations slows the code it traces several times."""
    began = time.perf_counter()
    fn()
    took = time.perf_counter() - began
    tracemalloc.start()
    (again or fn)()
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return took, peak


def bench_size(data: Path, client, settings, turns: int, rounds: int) -> dict[str, tuple[float, float]]:
    """Times (median s, peak MB) of the baseline, the cold and warm page, and two live polls."""
    run_id = f"job-{turns}"
    directory = data / "runs" / run_id
    transcript = Transcript(directory, Redactor([]))
    transcript.record("run_start", task="Fix the parser", repo="octo/app", model="m", sandbox="local")
    write_turns(transcript, 1, turns)
    url = run_path(settings.store, run_id)
    twin = data / "runs" / f"job-{turns}9"  # the same transcript, for the cold page's memory
    twin.mkdir(parents=True)
    shutil.copy(transcript.path, twin / JSONL_NAME)

    def page(suffix: str = "", link: str = url) -> None:
        answer = client.get(link + suffix)
        assert answer.status_code == 200 and b"<h2>Turn" in answer.data, answer.status_code

    out = {"baseline": measured(lambda: markdown_html(render_markdown(load_events(transcript.path),
                                                                      max_block_chars=MAX_BLOCK_CHARS))),
           "page cold": measured(page, lambda: page(link=run_path(settings.store, twin.name)))}
    warm = [measured(page) for _ in range(rounds)]
    out["page warm"] = (statistics.median(w[0] for w in warm), max(w[1] for w in warm))
    size = transcript.path.stat().st_size
    events = url.replace(f"/runs/{run_id}?", f"/runs/{run_id}/events?")
    idle = [measured(lambda: client.get(f"{events}&after=0&size={size}")) for _ in range(rounds)]
    out["poll, nothing new"] = (statistics.median(i[0] for i in idle), max(i[1] for i in idle))
    write_turns(transcript, turns + 1, turns + 1)
    out["poll, one new turn"] = measured(lambda: client.get(f"{events}&after={size}&size={size}"))
    transcript.close()
    write_record(directory, RunResult(run_id, "success", stop_reason="completed"))
    out["a late page, ended"] = measured(lambda: page(f"&page={turns // 50}"))  # 50 turns, the last full page
    return out


def main(argv: list[str] | None = None) -> int:
    scale = command_line(argv, sizes=("turns", "50,500,5000"), rounds=("rounds", 5), smoke=([5, 60], 1))
    ok = True
    with tempfile.TemporaryDirectory(prefix="decode-bench-page-") as tmp:
        data = Path(tmp)
        store = Store(data / "jobs.sqlite3")
        app = web_app(data, store)
        client, settings = app.test_client(), app.extensions["decode"].settings
        print("baseline: the whole transcript loaded and rendered as one page, as before, in the same run")
        table = Table(("turns", ">6"), ("what", "<20"), ("seconds", ">8.3f"), ("peak MB", ">8.1f"),
                      ("vs baseline", ">12"))
        for turns in scale.sizes:
            results = bench_size(data, client, settings, turns, scale.rounds)
            base_s, base_mb = results["baseline"]
            for what, (seconds, peak) in results.items():
                table.row(turns, what, seconds, peak,
                          "" if what == "baseline" else f"{ratio(seconds, base_s)} t {ratio(peak, base_mb)} m")
            if turns >= 5000:
                ok &= results["page cold"][0] <= TARGET_S
        store.close()
    target(f"the page of 5,000 turns within {TARGET_S:.0f} s", ok)
    return 0


if __name__ == "__main__":
    sys.exit(main())
