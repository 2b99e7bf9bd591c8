"""Wall time of `decode run --attempts 3` against one attempt on the same task.

    python3 bench/attempts.py [--mode bwrap] [--rounds 3] [--work-s 3]
    python3 bench/attempts.py --smoke          # one quick round of each, for CI: checks it runs, no target

Each run goes through the real console script and sandbox (SANDBOX_MODE=--mode) on a small repository with
decode.yml's `verify:`, with a scripted session (DECODE_MODEL=scripted:, so no key and no network) whose
first tool call sleeps `--work-s` seconds: the time a real model and its commands take, which attempts
overlap. Each of the three attempts replays the same session. Prints the median wall time of each and their
ratio. Target (issue 37): three attempts take at most 1.5x one attempt, since they run at once.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = 1.5
DECODE = str(Path(sys.executable).with_name("decode"))


def session(work_s: float) -> list:
    """The scripted attempt: work for `work_s` seconds, fix the bug, answer."""
    return [[{"type": "tool_use", "name": "bash", "input": {"command": f"sleep {work_s}"}}],
            [{"type": "tool_use", "name": "edit", "input": {"path": "greet.py", "old_string": "'Hello ' + name",
                                                             "new_string": "f'Hello, {name}!'"}}],
            [{"type": "text", "text": "greet says Hello, NAME! now."}]]


def make_repo(root: Path) -> Path:
    """A one-file repository whose decode.yml verifies the fix."""
    repo = root / "greet"
    (repo / ".github").mkdir(parents=True)
    (repo / "greet.py").write_text("def greet(name):\n    return 'Hello ' + name\n")
    verify = "python3 -c \"import greet; assert greet.greet('Ann') == 'Hello, Ann!'\""
    (repo / ".github" / "decode.yml").write_text(f"verify:\n  - {json.dumps(verify)}\n")
    for argv in (["init", "-q", "-b", "main"], ["add", "-A"],
                 ["-c", "user.name=bench", "-c", "user.email=bench@example.com", "commit", "-q", "-m", "bug"]):
        subprocess.run(["git", *argv], cwd=repo, check=True)
    return repo


def one_run(root: Path, repo: Path, attempts: int, mode: str, script: Path, n: int) -> float:
    """Seconds of one `decode run --attempts N --no-pr`; exits on a failed run."""
    env = {"PATH": os.environ["PATH"], "HOME": str(root / "home"), "SANDBOX_MODE": mode,
           "DECODE_MODEL": f"scripted:{script}", "DECODE_DATA_DIR": str(root / f"data-{attempts}-{n}")}
    started = time.monotonic()
    done = subprocess.run([DECODE, "run", "--repo", str(repo), "--no-pr", "--attempts", str(attempts),
                           "greet(name) should say 'Hello, NAME!'"], env=env, capture_output=True, text=True)
    seconds = time.monotonic() - started
    if done.returncode != 0 or (attempts > 1 and done.stdout.count("(published)") != 1):
        sys.exit(f"bench/attempts.py: --attempts {attempts} failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", default="bwrap", help="SANDBOX_MODE (default bwrap)")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each (default 3)")
    parser.add_argument("--work-s", type=float, default=3.0, help="seconds each attempt works (default 3)")
    parser.add_argument("--smoke", action="store_true", help="one quick round: checks it runs, no target")
    args = parser.parse_args()
    rounds, work = (1, 0.1) if args.smoke else (args.rounds, args.work_s)
    with tempfile.TemporaryDirectory(prefix="bench-attempts-") as tmp:
        root = Path(tmp)
        repo = make_repo(root)
        script = root / "session.json"
        script.write_text(json.dumps(session(work)))
        times: dict[int, list[float]] = {1: [], 3: []}
        for n in range(rounds):
            for attempts in (1, 3):
                times[attempts].append(one_run(root, repo, attempts, args.mode, script, n))
    one, three = statistics.median(times[1]), statistics.median(times[3])
    ratio = three / one
    print(f"SANDBOX_MODE={args.mode}, {rounds} round(s), each attempt works {work:g}s")
    print(f"one attempt:    {one:.2f}s (median of {', '.join(f'{t:.2f}' for t in times[1])})")
    print(f"three attempts: {three:.2f}s (median of {', '.join(f'{t:.2f}' for t in times[3])})")
    print(f"ratio: {ratio:.2f}x (target <= {TARGET}x)" + (" [smoke: not judged]" if args.smoke else ""))
    return 0 if args.smoke or ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
