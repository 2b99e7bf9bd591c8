"""Webhook acknowledgement latency and peak throughput over loopback.

    python3 bench/webhook_ack.py [--rate 200] [--seconds 30] [--peak-seconds 10] [--connections 8]

The server is the real intake: `create_app` (signature check, trigger rules,
a durable SQLite commit per delivery, then 202) under waitress with 8 threads,
as `decode serve` runs it; no worker pool, so every delivery stays queued.
Every request is a correctly signed `issues.labeled` delivery with a new
delivery id, so each acknowledgement follows a durable write. The baseline, in
the same run, is a bare WSGI app on the same waitress setup answering 200.

Open loop: deliveries are sent at a fixed rate from a schedule (latency counts
from the scheduled time, so a stalled server cannot hide queueing). Peak:
`--connections` keep-alive clients send as fast as they can.
Targets (issue 4): p99 <= 50 ms at 200 deliveries/s; >= 500 deliveries/s peak.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import logging  # noqa: E402

import waitress  # noqa: E402

from bot.config import Settings  # noqa: E402
from bot.server import create_app  # noqa: E402
from bot.server.signature import sign  # noqa: E402
from bot.store import Store  # noqa: E402

SECRET = "bench-secret-0123456789"
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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=float, default=200)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--peak-seconds", type=float, default=10)
    parser.add_argument("--connections", type=int, default=8)
    args = parser.parse_args()
    logging.getLogger("waitress.queue").setLevel(logging.ERROR)
    data = Path(tempfile.mkdtemp(prefix="decode-bench-webhook-"))
    store = Store(data / "jobs.sqlite3")
    app = create_app(Settings(github_webhook_secret=SECRET, data_dir=data), store)
    _, port = start(app)
    _, bare_port = start(bare_app)

    results = {}
    for name, p in (("bare waitress", bare_port), ("decode intake", port)):
        lat, statuses = open_loop(p, args.rate, args.seconds)
        results[name] = lat
        bad = [s for s in statuses if s not in (200, 202)]
        print(f"{name:<14} {args.rate:.0f}/s for {args.seconds:.0f}s: p50 {pct(lat, 50):6.2f} ms  "
              f"p99 {pct(lat, 99):6.2f} ms  max {max(lat):7.2f} ms  ({len(lat)} sent, {len(bad)} not 2xx)")
    ratio = pct(results["decode intake"], 99) / pct(results["bare waitress"], 99)
    print(f"p99 ratio intake/bare: {ratio:.1f}x; target p99 <= 50 ms: "
          f"{'ok' if pct(results['decode intake'], 99) <= 50 else 'MISSED'}")
    bare_peak = closed_loop(bare_port, args.peak_seconds, args.connections)
    peak = closed_loop(port, args.peak_seconds, args.connections)
    print(f"peak, {args.connections} connections: bare {bare_peak:.0f}/s, intake {peak:.0f}/s "
          f"({peak / bare_peak:.2f}x bare); target >= 500/s: {'ok' if peak >= 500 else 'MISSED'}")
    print(f"jobs stored durably: {store.counts()['queued']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
