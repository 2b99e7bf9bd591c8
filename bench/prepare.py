"""Workspace preparation: the host's clean clone plus the sandbox's copy, on a generated repository.

    python3 bench/prepare.py [--mb 50] [--commits 40] [--rounds 5]

`prepare` clones once from the origin (the network clone on GitHub; a path here) into `clean/`,
then makes the sandbox's copy `workspace/` from it. The copy used to be a pack-protocol clone
(`--no-local`), which re-packs every object; it is now a file copy of the object store
(`--local --no-hardlinks`: no hardlink, no alternates, so nothing the sandbox writes reaches the
clean clone). Both ways are timed here in the same run, with the whole `prepare` for scale.
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

from bot.workspace.clone import prepare  # noqa: E402

ENV = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "b",
       "GIT_AUTHOR_EMAIL": "b@example.com", "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@example.com"}


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, env=ENV, check=True, capture_output=True)


def make_origin(top: Path, mb: int, commits: int) -> Path:
    """A repository whose history holds about `mb` MB of incompressible content over `commits` commits."""
    origin = top / "origin"
    origin.mkdir()
    git(origin, "init", "-q", "-b", "main")
    per_commit = mb * 1024 * 1024 // commits
    for i in range(commits):
        (origin / f"data{i % 10}.bin").write_bytes(os.urandom(per_commit))
        git(origin, "add", "-A")
        git(origin, "commit", "-q", "-m", f"commit {i}")
    return origin


def copy_time(clean: Path, target: Path, flags: list[str]) -> float:
    started = time.perf_counter()
    git(clean.parent, "clone", "--quiet", "--template=", *flags, "--no-checkout", "--", str(clean), str(target))
    git(target, "checkout", "--quiet", "-B", "decode/bench", "HEAD")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=50)
    parser.add_argument("--commits", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    top = Path(tempfile.mkdtemp(prefix="decode-bench-prepare-"))
    try:
        origin = make_origin(top, args.mb, args.commits)
        old, new, whole = [], [], []
        for r in range(args.rounds):
            run = top / f"run{r}"
            started = time.perf_counter()
            ws = prepare(str(origin), run, "decode/bench")
            whole.append(time.perf_counter() - started)
            old.append(copy_time(ws.clean, run / "copy-pack", ["--no-local"]))
            new.append(copy_time(ws.clean, run / "copy-files", ["--local", "--no-hardlinks"]))
            shutil.rmtree(run)
        o, n, w = (statistics.median(x) * 1000 for x in (old, new, whole))
        print(f"repository: {args.mb} MB of history in {args.commits} commits; median of {args.rounds} rounds")
        print(f"  sandbox copy, pack clone (before):   {o:8.1f} ms")
        print(f"  sandbox copy, file copy (now):       {n:8.1f} ms   ratio {o / n:5.1f}x faster")
        print(f"  whole prepare (clone + copy, now):   {w:8.1f} ms")
    finally:
        shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    main()
