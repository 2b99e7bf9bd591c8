"""A repository seen before: `prepare` through the mirror, first and second run, beside a bare `git clone`.

    python3 bench/mirror.py [--files 8000] [--rounds 3]

A generated repository of `--files` small files (and some history) is served over smart HTTP with a token
(`git http-backend` behind Basic auth, as tests/fakes/git_http.py does), and timed, each round on a new
data dir: a bare `git clone` of the URL (with a working tree, the floor), `prepare` without a mirror (every
run's cost before mirrors), `prepare` on the empty data dir (first run: the mirror is made) and `prepare`
again on it (second run: only what is new is fetched, the clone is local, the tree is checked out once).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.workspace.clone import git_env, prepare  # noqa: E402
from bot.workspace.mirror import Mirrors  # noqa: E402
from tests.fakes.git_http import GitHttpServer  # noqa: E402

TOKEN = "ghs_" + "B" * 36
WHO = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.com", "GIT_COMMITTER_NAME": "b",
       "GIT_COMMITTER_EMAIL": "b@example.com"}


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, env={**git_env(local=True), **WHO}, check=True, capture_output=True)


def make_served(top: Path, files: int) -> Path:
    """`top/served/o/r.git`: `files` small files in nested directories, over 20 commits."""
    work = top / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    for i in range(files):
        path = work / f"pkg{i % 40}" / f"mod{i % 7}" / f"file{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# file {i}\nVALUE = {i}\n\ndef f{i}():\n    return VALUE * {i % 13}\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "initial")
    for c in range(19):
        (work / "pkg0" / "mod0" / "file0.py").write_text(f"VALUE = {c}\n")
        git(work, "commit", "-qam", f"change {c}")
    git(top, "clone", "-q", "--bare", str(work), str(top / "served" / "o" / "r.git"))
    return top / "served"


def timed(action: object) -> float:
    started = time.perf_counter()
    action()  # type: ignore[operator]
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=8000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    top = Path(tempfile.mkdtemp(prefix="decode-bench-mirror-"))
    rows: dict[str, list[float]] = {"bare git clone": [], "prepare, no mirror": [], "prepare, first run": [],
                                    "prepare, second run": []}
    try:
        served = make_served(top, args.files)
        with GitHttpServer(served, password=TOKEN) as server:
            url = server.url + "o/r.git"
            for r in range(args.rounds):
                round_dir = top / f"round{r}"
                mirrors = Mirrors(round_dir / "data" / "mirrors")
                rows["bare git clone"].append(timed(lambda: subprocess.run(
                    ["git", "clone", "-q", url, str(round_dir / "bare")], env=git_env(TOKEN), check=True)))
                rows["prepare, no mirror"].append(timed(lambda: prepare(url, round_dir / "plain", "b", token=TOKEN)))
                rows["prepare, first run"].append(timed(lambda: prepare(url, round_dir / "one", "b", token=TOKEN,
                                                                        mirrors=mirrors)))
                rows["prepare, second run"].append(timed(lambda: prepare(url, round_dir / "two", "b", token=TOKEN,
                                                                         mirrors=mirrors)))
                os.sync()  # what the round wrote is on disk before the next is timed
        floor = statistics.median(rows["bare git clone"])
        print(f"repository: {args.files} small files, 20 commits, over smart HTTP; median of {args.rounds} rounds")
        for name, times in rows.items():
            median = statistics.median(times)
            print(f"  {name:22} {median * 1000:8.0f} ms   {median / floor:5.2f}x the bare clone   "
                  f"(rounds: {', '.join(f'{t * 1000:.0f}' for t in times)})")
    finally:
        shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    main()
