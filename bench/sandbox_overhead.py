"""Per-command overhead of each sandbox backend against a bare fork/exec.

    python3 bench/sandbox_overhead.py [--n 300] [--modes local,bwrap,docker] [--failing 50] [--files 5000]

Runs `true` N times through each backend's `Sandbox.run` and N times as a bare
`subprocess.run(["true"])` in the same process, interleaved in rounds so that
machine noise hits both alike, and prints medians, p90 and the ratio to the
bare baseline. Target (issue 26): every backend within 2x the bare fork/exec.
A backend runs each command with bash, so a bare `bash -c true` is shown too:
the floor no backend can go under (about 1.4x the bare fork/exec here).

A failing command costs the backend a cap check (was the command killed by the
memory cap?), so `--failing N` also runs `false` N times through each backend,
interleaved with as many `true`, and prints its median against the succeeding
command's of the same run: the price of that check. The workspace holds
`--files` small files in directories of 100, as a checkout does, since what a
check measures can grow with the tree.

Each backend gets a workspace of its own, as every run does: under a root bot
the docker backend hands its workspace to the sandbox's uid for the run, and a
bwrap sandbox (uid 0 without capabilities) sharing it could no longer enter it.
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

from bot.sandbox import SandboxSpec, open_sandbox  # noqa: E402

TARGET_X_BARE = 2.0


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def new_workspace(files: int) -> Path:
    """A git workspace holding `files` small files, 100 to a directory."""
    workspace = Path(tempfile.mkdtemp(prefix="decode-bench-"))
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    for i in range(files):
        (workspace / f"d{i // 100}").mkdir(exist_ok=True)
        (workspace / f"d{i // 100}" / f"f{i}.py").write_text(f"x = {i}\n")
    return workspace


def failing(sandboxes: dict, n: int) -> None:
    """`false` N times through each sandbox, interleaved with `true`: the median of each and their ratio."""
    if not n:
        return
    samples: dict[str, tuple[list[float], list[float]]] = {m: ([], []) for m in sandboxes}
    for _ in range(n):
        for mode, sb in sandboxes.items():
            samples[mode][0].append(timed(lambda: sb.run("true")))
            samples[mode][1].append(timed(lambda: sb.run("false")))
    print(f"\n{'failing (n=' + str(n) + ')':<16}{'true ms':>10}{'false ms':>10}{'x true':>8}")
    for mode, (ok, failed) in samples.items():
        med_ok, med_failed = statistics.median(ok), statistics.median(failed)
        print(f"{mode:<16}{med_ok:>10.2f}{med_failed:>10.2f}{med_failed / med_ok:>8.2f}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--modes", default="local,bwrap,docker")
    parser.add_argument("--image", default="decode-sandbox:latest")
    parser.add_argument("--failing", type=int, default=50, help="failing commands per backend (0: none)")
    parser.add_argument("--files", type=int, default=5000, help="files in each backend's workspace")
    args = parser.parse_args()
    sandboxes, workspaces = {}, []
    for mode in args.modes.split(","):
        workspaces.append(new_workspace(args.files))
        try:
            sandboxes[mode] = open_sandbox(mode, SandboxSpec(workspace=workspaces[-1], image=args.image,
                                                             name="decode-bench"))
        except Exception as e:  # noqa: BLE001 - a missing backend is reported, not fatal
            print(f"{mode}: unavailable ({e})")
    samples: dict[str, list[float]] = {"bare fork/exec": [], "bare bash -c": [], **{m: [] for m in sandboxes}}
    for sb in sandboxes.values():
        for _ in range(20):
            sb.run("true")
    for _ in range(args.n):
        samples["bare fork/exec"].append(timed(lambda: subprocess.run(["true"])))
        samples["bare bash -c"].append(timed(lambda: subprocess.run(["/bin/bash", "-c", "true"])))
        for mode, sb in sandboxes.items():
            samples[mode].append(timed(lambda: sb.run("true")))
    base = statistics.median(samples["bare fork/exec"])
    print(f"{'backend':<16}{'median ms':>10}{'p90 ms':>9}{'x bare':>8}  verdict (target: {TARGET_X_BARE:.0f}x bare)")
    for name, values in samples.items():
        med = statistics.median(values)
        p90 = statistics.quantiles(values, n=10)[-1]
        verdict = "" if name.startswith("bare") else ("ok" if med <= TARGET_X_BARE * base else "OVER TARGET")
        print(f"{name:<16}{med:>10.2f}{p90:>9.2f}{med / base:>8.2f}  {verdict}")
    failing(sandboxes, args.failing)
    for sb in sandboxes.values():
        sb.close()
    for workspace in workspaces:
        shutil.rmtree(workspace, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
