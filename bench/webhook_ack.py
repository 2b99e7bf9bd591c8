"""Webhook acknowledgement latency and peak throughput over loopback, for both job stores.

    python3 bench/webhook_ack.py [--rate 200] [--seconds 30] [--peak-seconds 10] [--connections 8]
                                 [--database-url URL]

The server is the real intake: `create_app` (signature check, trigger rules,
a durable commit per delivery, then 202) under waitress with 8 threads, as
`decode serve` runs it; no worker pool, so every delivery stays queued. It is
measured once on the SQLite store and once on the PostgreSQL store, each opened
by `open_store` as a process opens its own. Every request is a correctly signed
`issues.labeled` delivery with a new delivery id, so each acknowledgement
follows a durable write. The baseline, in the same run, is a bare WSGI app on
the same waitress setup answering 200; the ratios are against it.

PostgreSQL: the server at --database-url (default DECODE_BENCH_DATABASE_URL,
else DECODE_TEST_DATABASE_URL, else the test role's database); the bench creates
a database of its own there (decode_bench_<random>) and drops it at the end, so
it never touches existing data. When the server cannot be reached, one line says
so and only the SQLite rows follow.

Open loop: deliveries are sent at a fixed rate from a schedule (latency counts
from the scheduled time, so a stalled server cannot hide queueing). Peak:
`--connections` keep-alive clients send as fast as they can.
Targets (issue 4): p99 <= 50 ms at 200 deliveries/s, for both stores;
>= 500 deliveries/s peak (SQLite; PostgreSQL's peak is shown beside it).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import secrets
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import logging  # noqa: E402

import psycopg  # noqa: E402
import waitress  # noqa: E402

from bot.config import Settings  # noqa: E402
from bot.server import create_app  # noqa: E402
from bot.server.signature import sign  # noqa: E402
from bot.jobs.sqlite import StoreError, open_store  # noqa: E402

SECRET = "bench-secret-0123456789"
DEFAULT_DATABASE_URL = "postgresql://decode:decode@127.0.0.1:5432/decode_test"
TARGET_P99_MS = 50.0
TARGET_PEAK = 500.0
PAYLOAD = {
    "action": "labeled", "label": {"name": "agent"},
    "issue": {"number": 1, "title": "t", "body": "b", "user": {"login": "alice", "type": "User"}},
    "repository": {"full_name": "octo/bench", "name": "bench", "owner": {"login": "octo"}},
    "sender": {"login": "alice", "type": "User"},
}


def start(app) -> tuple[object, int]:
    server = waitress.create_server(app, host="127.0.0.1", port=0, threads=8, ident="bench")
    threading.Thread(target=server.run, daemon=True).start()
    return server, server.effective_port


def bare_app(environ, start_response):  # type: ignore[no-untyped-def]
    environ["wsgi.input"].read()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", "2")])
    return [b"{}"]


def request(conn: http.client.HTTPConnection, number: int) -> int:
    payload = dict(PAYLOAD, issue=dict(PAYLOAD["issue"], number=number))
    body = json.dumps(payload).encode()
    headers = {"Content-Type": "application/json", "X-GitHub-Event": "issues",
               "X-GitHub-Delivery": str(uuid.uuid4()), "X-Hub-Signature-256": sign(body, SECRET)}
    conn.request("POST", "/webhook", body=body, headers=headers)
    response = conn.getresponse()
    response.read()
    return response.status


def open_loop(port: int, rate: float, seconds: float, senders: int = 16) -> tuple[list[float], list[int]]:
    """Latencies (ms, from the scheduled send time) of `rate`/s deliveries for `seconds`."""
    total = int(rate * seconds)
    start_at = time.perf_counter() + 0.2
    latencies: list[float] = []
    statuses: list[int] = []
    lock = threading.Lock()
    counter = iter(range(total))

    def sender() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        for i in counter:
            due = start_at + i / rate
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            status = request(conn, i % 5000 + 1)
            took = (time.perf_counter() - due) * 1000
            with lock:
                latencies.append(took)
                statuses.append(status)

    threads = [threading.Thread(target=sender) for _ in range(senders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, statuses


def closed_loop(port: int, seconds: float, connections: int) -> float:
    """Deliveries per second with `connections` clients sending back to back."""
    stop = time.perf_counter() + seconds
    done = [0] * connections

    def client(k: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        i = 0
        while time.perf_counter() < stop:
            request(conn, k * 100000 + i % 5000 + 1)
            i += 1
        done[k] = i

    began = time.perf_counter()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(done) / (time.perf_counter() - began)


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=1000)[int(q * 10) - 1] if len(values) > 1 else values[0]


@dataclass
class Result:
    """One server's numbers: open-loop latencies (ms), answers that were not 2xx, peak deliveries/s."""

    latencies: list[float]
    bad: int
    peak: float


def measure(app: Callable[..., object], args: argparse.Namespace) -> Result:
    """`app` under waitress: the open loop at `args.rate`, then the peak over `args.connections`."""
    _, port = start(app)
    latencies, statuses = open_loop(port, args.rate, args.seconds)
    peak = closed_loop(port, args.peak_seconds, args.connections)
    return Result(latencies, sum(s not in (200, 202) for s in statuses), peak)


def row(name: str, result: Result, bare: Result | None = None, *, peak_target: bool = False) -> str:
    """One printed row; against `bare`, the ratios and whether the targets are met."""
    lat = result.latencies
    line = (f"{name:<17} p50 {pct(lat, 50):6.2f} ms  p99 {pct(lat, 99):6.2f} ms  max {max(lat):7.2f} ms  "
            f"({len(lat)} sent, {result.bad} not 2xx)  peak {result.peak:5.0f}/s")
    if bare is None:
        return line
    p99 = pct(lat, 99)
    line += (f"  | p99 {p99 / pct(bare.latencies, 99):4.1f}x bare, peak {result.peak / bare.peak:4.2f}x bare; "
             f"p99 <= {TARGET_P99_MS:.0f} ms: {'ok' if p99 <= TARGET_P99_MS and not result.bad else 'MISSED'}")
    if peak_target:
        line += f", peak >= {TARGET_PEAK:.0f}/s: {'ok' if result.peak >= TARGET_PEAK else 'MISSED'}"
    return line


@contextmanager
def bench_database(url: str) -> Iterator[str]:
    """The URL of a fresh database of this run's own on the PostgreSQL server at `url`, dropped afterwards
    with whatever connections are left on it."""
    name = f"decode_bench_{secrets.token_hex(6)}"
    with psycopg.connect(url, autocommit=True, connect_timeout=5) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield urlunsplit(urlsplit(url)._replace(path=f"/{name}"))
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=float, default=200)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--peak-seconds", type=float, default=10)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--database-url", default=os.environ.get("DECODE_BENCH_DATABASE_URL")
                        or os.environ.get("DECODE_TEST_DATABASE_URL") or DEFAULT_DATABASE_URL,
                        help="PostgreSQL server to create the bench's own database on")
    args = parser.parse_args()
    logging.getLogger("waitress.queue").setLevel(logging.ERROR)
    data = Path(tempfile.mkdtemp(prefix="decode-bench-webhook-"))
    sqlite = Settings(github_webhook_secret=SECRET, data_dir=data)
    stores = {"sqlite": sqlite}
    with ExitStack() as stack:
        try:
            database_url = stack.enter_context(bench_database(args.database_url))
            stores["postgresql"] = sqlite.replace(database_url=database_url)
        except psycopg.Error as e:
            problem = " ".join(Settings(database_url=args.database_url).redactor.redact(str(e)).split())
            print(f"postgresql: cannot use the server, so no PostgreSQL row ({problem}); "
                  "set --database-url or DECODE_BENCH_DATABASE_URL")
        print(f"open loop {args.rate:.0f}/s for {args.seconds:.0f}s; peak: {args.connections} connections "
              f"for {args.peak_seconds:.0f}s")
        bare = measure(bare_app, args)
        print(row("bare waitress", bare))
        stored = []
        for name, settings in stores.items():
            try:
                store = stack.enter_context(closing(open_store(settings.store)))
            except StoreError as e:
                print(f"{name}: cannot open the store, no {name} row ({e})")
                continue
            print(row(f"{name} intake", measure(create_app(settings, store), args), bare,
                      peak_target=name == "sqlite"))
            stored.append(f"{name} {store.counts()['queued']}")
        print(f"jobs stored durably: {', '.join(stored)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
