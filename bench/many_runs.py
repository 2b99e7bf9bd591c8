"""Many runs: the dashboard, `decode runs`, a page of `JobStore.runs` and a claim with 100, 10,000 and
100,000 runs kept, on SQLite and PostgreSQL: p50/p99 (issue 38).

    python3 bench/many_runs.py [--runs 100,10000,100000] [--stores sqlite,postgres] [--samples 40] [--smoke]

Jobs are written in bulk straight into a store that `open_store` migrated (50 repositories of 5 installations,
every job done with its result, claimed a second after it came, but the newest 100, queued): what a data dir
looks like after months of use. Timed, each `--samples` times: the dashboard's whole page (GET / through
the real Flask app, signed in to all 50 repositories: the queue table's first page, then the newest runs;
then filtered to one repository, to done runs, and the queue's second page), the store's page of runs
(deep: the page before the middle job), the job counts each /metrics scrape asks, a claim and its finish,
and `decode runs` over as many run directories (each with its record.json; SQLite's pass only, it reads no
store). The baseline is the same
measure at 10,000 runs (else the smallest size), in the same run: a page that costs what it lists stays near
1x however many runs there are. Target: a dashboard page within 50 ms at 100,000 runs, flat from 10,000 to
100,000.
PostgreSQL is found at DECODE_TEST_DATABASE_URL (default: the one scripts/setup makes).
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psycopg  # noqa: E402

from bench._scale import Table, command_line, ratio, target  # noqa: E402

from bot.cli.runs import list_runs  # noqa: E402
from bot.jobs.store import JobStore  # noqa: E402
from bot.run.result import Figures, RunResult, write_record  # noqa: E402
from tests.support.runs import sign_in, web_app  # noqa: E402
from tests.support.stores import open_at, postgres_test_url, with_database  # noqa: E402

REPOS = [f"octo/repo{i}" for i in range(50)]
QUEUED = 100
TARGET_MS = 50.0
RESULT = json.dumps(RunResult("job-0", "success", repo="octo/repo0", branch="decode/issue-1", stop_reason="completed",
                              pr_url="https://github.com/octo/repo0/pull/1",
                              figures=Figures(turns=12, cost_usd=0.42, seconds=300.0)).to_json())
INSTALLATIONS = 5  # the repositories' jobs spread over this many installations, as an App serves several
COLUMNS = ("key", "payload", "state", "attempts", "created_at", "updated_at", "claimed_at", "result", "installation")


def queued(n: int) -> int:
    """How many of `n` jobs are queued: `QUEUED`, or half of a small store."""
    return min(QUEUED, n // 2)


def rows(n: int) -> list[tuple]:
    """`n` jobs, oldest first, across `REPOS` and `INSTALLATIONS`: done with a result (claimed a second after it
    came), but the newest `queued(n)`, queued."""
    now, done = time.time() - n, n - queued(n)
    return [(f"{REPOS[i % 50]}#{i}", "{}", "done" if i < done else "queued", 1, now + i, now + i,
             now + i + 1 if i < done else None, RESULT if i < done else None, str(1000 + i % 50 % INSTALLATIONS))
            for i in range(n)]


def fill_sqlite(path: Path, n: int) -> None:
    db = sqlite3.connect(path)
    with db:
        db.executemany(f"INSERT INTO jobs ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})", rows(n))
    db.execute("ANALYZE")
    db.close()


def fill_postgres(url: str, n: int) -> None:
    with psycopg.connect(url) as conn, conn.cursor() as cur:
        with cur.copy(f"COPY jobs ({', '.join(COLUMNS)}) FROM STDIN") as copy:
            for row in rows(n):
                copy.write_row(row)
        conn.commit()
        cur.execute("ANALYZE jobs")


def samples(fn: Callable[[], object], count: int) -> tuple[float, float]:
    """(p50, p99) in ms of `count` calls of `fn`, after one warm-up."""
    fn()
    took = []
    for _ in range(count):
        began = time.perf_counter()
        fn()
        took.append((time.perf_counter() - began) * 1000)
    took.sort()
    return statistics.median(took), took[min(len(took) - 1, int(len(took) * 0.99))]


def measure(store: JobStore, data: Path, n: int, count: int) -> dict[str, tuple[float, float]]:
    """The p50/p99 of each measure over a store of `n` runs."""
    app = web_app(data, store, github_token="ghs_bench", github_client_id="Iv23li0bench",
                  github_client_secret="bench-secret-value-123")
    client = app.test_client()
    sign_in(client, data, "alice", set(REPOS))

    def get(url: str, *parts: bytes) -> None:
        answer = client.get(url)
        assert answer.status_code == 200 and all(part in answer.data for part in parts), answer.status_code

    def claim() -> None:
        job = store.claim("bench")
        if job is not None:
            store.finish(job.id, "bench", "done")
    middle = store.runs(1, before=n // 2 + 1)[0].id
    table, runs = b'<table id="queue">', b'<table id="runs">'
    return {"dashboard": samples(lambda: get("/", table, runs), count),
            "dashboard, one repo": samples(lambda: get("/?repo=octo/repo7", table, runs), count),
            "dashboard, done": samples(lambda: get("/?state=done", runs), count),
            "dashboard, queue p2": samples(lambda: get(f"/?queued_after={queued(n) // 2}", table, runs), count),
            "store page, deep": samples(lambda: store.runs(200, repos=REPOS, before=middle), count),
            "job counts": samples(store.counts, count),  # what each /metrics scrape asks
            "claim + finish": samples(claim, min(count, queued(n) - 2))}


def run_dirs(data: Path, n: int) -> None:
    """`n` run directories with their record.json, as a data dir of that many finished runs holds."""
    runs = data / "runs"
    for i in range(n):
        directory = runs / f"job-{i}"
        directory.mkdir(parents=True)
        write_record(directory, RunResult(f"job-{i}", "success", repo=REPOS[i % 50], stop_reason="completed"))


def one_store(kind: str, n: int, tmp: Path, count: int) -> dict[str, tuple[float, float]]:
    data = tmp / f"{kind}-{n}"
    data.mkdir()
    if kind == "sqlite":
        open_at(str(data)).close()  # the schema, migrated as a server opens it
        fill_sqlite(data / "jobs.sqlite3", n)
        store = open_at(str(data))
    else:
        schema = f"bench_{secrets.token_hex(4)}"
        base = postgres_test_url()
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        url = with_database(base, base.rsplit("/", 1)[1].split("?")[0], schema)
        open_at(url).close()
        fill_postgres(url, n)
        store = open_at(url)
    try:
        found = measure(store, data, n, count)
    finally:
        store.close()
        if kind == "postgres":
            with psycopg.connect(postgres_test_url(), autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA {schema} CASCADE")
    if kind == "sqlite":
        run_dirs(data, n)
        found["decode runs"] = samples(lambda: list_runs(data, 20), max(count // 4, 3))
    return found


def main(argv: list[str] | None = None) -> int:
    scale = command_line(argv, sizes=("runs", "100,10000,100000"), rounds=("samples", 40), smoke=([200, 1000], 5),
                         stores="sqlite,postgres")
    sizes, count = scale.sizes, scale.rounds
    ok = True
    baseline = 10_000 if 10_000 in sizes else sizes[0]
    with tempfile.TemporaryDirectory(prefix="decode-bench-runs-") as tmp:
        print(f"baseline: each measure at {baseline:,} runs, same run; p50 / p99 in ms over {count} samples")
        table = Table(("store", "<9"), ("runs", ">8,"), ("what", "<20"), ("p50", ">8.2f"), ("p99", ">8.2f"),
                      ("p50 vs base", ">12"))
        for kind in scale.args.stores.split(","):
            found = {n: one_store(kind, n, Path(tmp), count) for n in sizes}
            for n in sizes:
                for what, (p50, p99) in found[n].items():
                    table.row(kind, n, what, p50, p99, ratio(p50, found[baseline][what][0]))
                    if what.startswith("dashboard") and n >= 100_000:
                        ok &= p50 <= TARGET_MS
    target(f"a dashboard page within {TARGET_MS:.0f} ms at 100,000 runs", ok)
    return 0


if __name__ == "__main__":
    sys.exit(main())
