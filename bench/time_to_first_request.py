"""Time from a job's start to its first model request, under SANDBOX_MODE=docker.

    python3 bench/time_to_first_request.py [--mb 50] [--commits 40] [--rounds 3]

One process runs the real pipeline (`bot.run.pipeline.execute`: the model check, the clone and the sandbox's
copy, decode.yml, the sandbox, setup or the setup cache, the system prompt) on a generated repository: about
`--mb` MB of incompressible history over `--commits` commits, plus a small Python package whose decode.yml
setup is `pip install -e .` (offline: `--no-build-isolation --no-index`, with the image's setuptools, so the
figure does not depend on a package index). The origin is packed, as a server's repository is, and
served by URL (`git daemon` on 127.0.0.1: the pack protocol over a socket, without a network's transfer time).
The cold rows run with the mirrors off (`DECODE_MIRROR_MB=0`: every run clones from the URL); the setup cache
rows are a repository seen before, on a data dir that keeps its mirror (`bot/workspace/mirror.py`). The model is scripted; the clock
stops when the agent loop makes its first model request.

Rows, each the median of `--rounds` runs, in one run of the bench (this machine is noisy, so the ratios are
against the baseline measured here, the cold run with setup and no cache):

- cold, setup, no cache: a new container, and setup runs (the baseline);
- cold, no setup: a new container, a repository without setup (target <= 2 s);
- setup cache hit, cold container: setup skipped, the cache entry's image started;
- setup cache hit, warm pool: setup skipped, a warm container of the entry's image claimed (DECODE_POOL_SIZE=1;
  the pool is full before each run, as on a server between jobs) (target <= 0.5 s).

Then the rows of a repository of many small files (`--files`, 8,000 by default, about 1 KB each in 200
directories), served by URL (`git daemon` on 127.0.0.1, the pack protocol over a socket), each run the
`decode` command itself (`python -m bot.cli run --repo git://...`, SANDBOX_MODE=docker, a scripted model), its
clock from the process's start to its first model request (the transcript's first `model_request` event),
beside a bare `git clone` of the same URL timed in the same round:

- many files, bare `git clone`: the reference;
- many files, cold: `decode run` on an empty data dir;
- many files, second run: `decode run` again on the data dir the cold run left (what a data dir keeps
  between runs of one repository, the mirror among it, shows here).

`--rows many` runs only these rows, `--rows pipeline` only the ones above.

What a server adds before this clock starts (the webhook's 202, the lease runner's next sweep, at most 0.5 s
later) is not included: bench/webhook_ack.py measures the first.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import socket
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.config import Settings  # noqa: E402
from bot.model.scripted import ScriptedModel  # noqa: E402
from bot.run.pipeline import Job, execute  # noqa: E402
from bot.sandbox import sandbox_spec, warm_pool  # noqa: E402
from bot.sandbox.docker import DockerLauncher  # noqa: E402
from bot.run.setup_cache import SetupCache  # noqa: E402
from bot.run.transcript import load_events  # noqa: E402

IMAGE = os.environ.get("DECODE_SANDBOX_IMAGE") or "decode-sandbox:latest"
SETUP = "pip install --no-build-isolation --no-index -e ."
TARGET_WARM_S, TARGET_COLD_S = 0.5, 2.0
ENV = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "b",
       "GIT_AUTHOR_EMAIL": "b@example.com", "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@example.com"}
PACKAGE = {
    "pyproject.toml": '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n\n'
                      '[project]\nname = "benchpkg"\nversion = "0.1"\n',
    "src/benchpkg/__init__.py": "def answer():\n    return 42\n",
}


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, env=ENV, check=True, capture_output=True)


def make_origin(path: Path, mb: int, commits: int, decode_yml: str | None) -> Path:
    """The generated repository (see the module docstring), with `decode_yml` as .github/decode.yml."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    files = dict(PACKAGE, **({".github/decode.yml": decode_yml} if decode_yml else {}))
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    per_commit = mb * 1024 * 1024 // commits
    for i in range(commits):
        (path / f"data{i % 10}.bin").write_bytes(os.urandom(per_commit))
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", f"commit {i}")
    git(path, "repack", "-adq")  # a server's repository is packed: GitHub sends from its packs
    return path


class FirstRequest(ScriptedModel):
    """A one-turn scripted model that notes when it is first asked."""

    def __init__(self) -> None:
        super().__init__([[{"type": "text", "text": "Nothing to do."}]], name="scripted-bench")
        self.asked_at: float | None = None

    def complete(self, **request: Any) -> Any:
        if self.asked_at is None:
            self.asked_at = time.perf_counter()
        return super().complete(**request)


def first_request_s(settings: Settings, origin: str, run_id: str) -> tuple[float, list[str]]:
    """Seconds from the start of `execute` to the first model request, and the run's setup cache results."""
    model = FirstRequest()
    started = time.perf_counter()
    outcome = execute(Job(repo=origin, task="Look around", branch=f"decode/run-{run_id}", run_id=run_id),
                      settings.run, client=model, progress=lambda line: None)
    assert model.asked_at is not None, f"run {run_id} never asked the model: {outcome.result.error}"
    events = load_events(outcome.transcript_jsonl)
    notes = [e["result"] for e in events if e["type"] == "setup_cache"]
    notes += ["pool" for e in events if e["type"] == "note" and "warm pool" in e.get("text", "")]
    return model.asked_at - started, notes


def make_many_files(path: Path, files: int) -> Path:
    """A bare repository of `files` small text files in 200 directories, two commits, packed."""
    work = path.with_name(path.name + "-work")
    work.mkdir(parents=True)
    git(work, "init", "-q", "-b", "main")
    git(work, "config", "gc.auto", "0")  # no gc detached in the background while the work tree is deleted
    for i in range(files):
        target = work / f"pkg{i % 200:03d}" / f"module{i:05d}.py"
        target.parent.mkdir(exist_ok=True)
        target.write_text(f'"""Module {i}."""\n\n' + "".join(f"def f{j}(x):\n    return x * {i} + {j}\n\n"
                                                             for j in range(12)))
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "many files")
    (work / "README.md").write_text("many small files\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "readme")
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(path)], env=ENV, check=True)
    git(path, "repack", "-adq")
    shutil.rmtree(work)
    return path


def serve(top: Path) -> tuple[subprocess.Popen, int]:
    """`git daemon` exporting the repositories under `top` on a free port of 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    daemon = subprocess.Popen(["git", "daemon", "--reuseaddr", "--export-all", f"--base-path={top}",
                               "--listen=127.0.0.1", f"--port={port}", str(top)], env=ENV,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return daemon, port
        except OSError:
            time.sleep(0.05)
    daemon.kill()
    raise SystemExit("git daemon did not start")


def decode_run_s(url: str, data: Path, session: Path) -> float:
    """Seconds from starting `decode run --repo url` to its first model request (the transcript's clock)."""
    env = {**ENV, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "SANDBOX_MODE": "docker",
           "DECODE_SANDBOX_IMAGE": IMAGE, "DECODE_DATA_DIR": str(data), "DECODE_MODEL": f"scripted:{session}"}
    env.pop("ANTHROPIC_API_KEY", None)
    started = time.time()
    done = subprocess.run([sys.executable, "-m", "bot.cli", "run", "--repo", url, "Look around"], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    transcript = Path(next(line.split(": ", 1)[1] for line in done.stdout.splitlines()
                           if line.startswith("transcript (jsonl): ")))
    events = [json.loads(line) for line in transcript.read_text().splitlines()]
    at = next(e["at"] for e in events if e["type"] == "model_request")
    return datetime.datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp() - started


def many_files_rows(top: Path, files: int, rounds: int) -> dict[str, list[float]]:
    """The many-files rows (see the module docstring): per round a bare clone, a cold run, a second run."""
    make_many_files(top / "served" / "many.git", files)
    daemon, port = serve(top / "served")
    url = f"git://127.0.0.1:{port}/many.git"
    session = top / "session.json"
    session.write_text(json.dumps([[{"type": "text", "text": "Nothing to do."}]]))
    runs: dict[str, list[float]] = {"many files, bare `git clone`": [], "many files, cold": [],
                                    "many files, second run": []}
    try:
        for r in range(rounds):
            os.sync()  # each row starts with nothing of the one before left to write back
            started = time.perf_counter()
            subprocess.run(["git", "clone", "-q", url, str(top / f"bare-{r}")], env=ENV, check=True)
            runs["many files, bare `git clone`"].append(time.perf_counter() - started)
            shutil.rmtree(top / f"bare-{r}")
            data = top / f"many-data-{r}"
            os.sync()
            runs["many files, cold"].append(decode_run_s(url, data, session))
            os.sync()
            runs["many files, second run"].append(decode_run_s(url, data, session))
    finally:
        daemon.kill()
        daemon.wait()
    return runs


def print_many_files(runs: dict[str, list[float]], files: int) -> None:
    """The many-files rows, each against the bare clone of the same round's median."""
    clone = statistics.median(runs["many files, bare `git clone`"])
    cold = statistics.median(runs["many files, cold"])
    print(f"repository: {files} small files served by git daemon; decode run from the process's start")
    for name, times in runs.items():
        median = statistics.median(times)
        than_cold = f", {median / cold:5.2f}x the cold run" if name == "many files, second run" else ""
        print(f"  {name:<32} {median:6.2f} s  (min {min(times):5.2f}, max {max(times):5.2f})  "
              f"{median / clone:5.2f}x the bare clone{than_cold}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=50)
    parser.add_argument("--commits", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--files", type=int, default=8000)
    parser.add_argument("--rows", choices=("all", "pipeline", "many"), default="all")
    args = parser.parse_args()
    top = Path(tempfile.mkdtemp(prefix="decode-bench-first-request-"))
    try:
        if args.rows in ("all", "many"):
            print_many_files(many_files_rows(top, args.files, args.rounds), args.files)
        if args.rows in ("all", "pipeline"):
            pipeline_rows(top, args)
    finally:
        shutil.rmtree(top, ignore_errors=True)
    return 0


def pipeline_rows(top: Path, args: argparse.Namespace) -> None:
    """The rows of the few-large-files repository through `execute` in this process."""
    data = top / "data"
    mirrored = Settings(sandbox_mode="docker", sandbox_image=IMAGE, data_dir=data, anthropic_api_key=None)
    base = mirrored.replace(mirror_mb=0)
    served = top / "served"
    make_origin(served / "plain.git", args.mb, args.commits, None)
    make_origin(served / "setup.git", args.mb, args.commits, f"setup:\n  - {SETUP}\n")
    make_origin(served / "cached.git", args.mb, args.commits,
                f"setup:\n  - {SETUP}\nsetup_cache_key: [pyproject.toml]\n")
    daemon, port = serve(served)
    plain, setup, cached = (f"git://127.0.0.1:{port}/{name}.git" for name in ("plain", "setup", "cached"))
    try:
        print(f"repository: {args.mb} MB of history in {args.commits} commits, setup `{SETUP}`; "
              f"image {IMAGE}; median of {args.rounds} runs")
        first_request_s(base, plain, "warm-up")  # the page cache and the image, as on a running host
        runs: dict[str, list[float]] = {}

        def measure(name: str, settings: Settings, origin: str, expect: list[str], before: Any = None) -> None:
            times = []
            for r in range(args.rounds):
                if before is not None:
                    before()
                seconds, seen = first_request_s(settings, origin, f"{len(runs)}-{r}")
                assert seen == expect, f"{name}: the run saw {seen}, not {expect}"
                times.append(seconds)
            runs[name] = times

        measure("cold, setup, no cache", base, setup, [])
        measure("cold, no setup", base, plain, [])
        first_request_s(mirrored, cached, "fill")  # the setup cache entry and the mirror the next rows hit
        measure("setup cache hit, cold container", mirrored, cached, ["hit"])
        [entry] = SetupCache(data / "setup-cache").entries()
        pooled = mirrored.replace(pool_size=1)
        pool = DockerLauncher.pool(sandbox_spec(pooled.sandbox, data, image=entry.tag))

        def full() -> None:
            assert pool.wait_full(120), pool.last_error

        measure("setup cache hit, warm pool", pooled, cached, ["hit", "pool"], before=full)
        baseline = statistics.median(runs["cold, setup, no cache"])
        for name, times in runs.items():
            median = statistics.median(times)
            target = {"cold, no setup": TARGET_COLD_S, "setup cache hit, warm pool": TARGET_WARM_S}.get(name)
            verdict = "" if target is None else f"  target <= {target:g} s: {'ok' if median <= target else 'MISSED'}"
            print(f"  {name:<32} {median:6.2f} s  (min {min(times):5.2f}, max {max(times):5.2f})  "
                  f"{median / baseline:5.2f}x the baseline, {baseline / median:5.1f}x faster{verdict}")
    finally:
        daemon.kill()
        daemon.wait()
        warm_pool.close_all()
        cache = SetupCache(data / "setup-cache")
        for entry in cache.entries():
            cache.remove(entry)


if __name__ == "__main__":
    sys.exit(main())
