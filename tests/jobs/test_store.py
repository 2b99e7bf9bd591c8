"""The job store conformance suite, against SQLite and PostgreSQL (`store_factory`): dedupe, durability
under SIGKILL, exclusive claims, leases, per-key order. The last tests are SQLite's own."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from bot.jobs.sqlite import Store
from bot.jobs.sqlite_sql import QUEUED_OF, REPO_RUN_IDS, RUNNABLE, RUNS_PAGE, TURNS
from bot.jobs.store import JobRecord, JobStore, StoreError
from tests.support.stores import StoreFactory, claim_until_empty

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def store(store_factory: StoreFactory) -> JobStore:
    return store_factory(lease_s=0.5, max_attempts=3)


def enqueue(store: JobStore, key: str = "octo/hello#1", n: int = 1) -> list[int]:
    ids = []
    for _ in range(n):
        job_id = store.record_delivery(f"d-{time.monotonic_ns()}-{len(ids)}", "issues", "queued", (key, {"k": key}))
        ids.append(job_id)
    return ids


def python(code: str, *args: str, **kwargs) -> subprocess.Popen:
    """A child Python process running `code` with the package importable."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", code, *args], env=env, text=True,
                            stdout=subprocess.PIPE, **kwargs)


def test_a_delivery_is_recorded_once(store: JobStore) -> None:
    first = store.record_delivery("abc", "issues", "queued", ("octo/hello#1", {"n": 1}))
    again = store.record_delivery("abc", "issues", "queued", ("octo/hello#1", {"n": 1}))
    ignored = store.record_delivery("def", "ping", "ignored")
    assert isinstance(first, int) and first is not True
    assert again is False
    assert ignored is None
    assert store.record_delivery("def", "ping", "ignored") is False
    assert store.counts() == {"queued": 1, "running": 0, "done": 0, "failed": 0}
    job = store.job(first)
    assert (job.delivery_id, job.key, job.payload, job.state, job.attempts) == (
        "abc", "octo/hello#1", {"n": 1}, "queued", 0)


def test_a_body_digest_already_seen_is_a_duplicate_under_any_delivery_id(store: JobStore) -> None:
    first = store.record_delivery("d-1", "issues", "queued", ("octo/hello#1", {"n": 1}), digest="abc123")
    replay = store.record_delivery("d-2", "issues", "queued", ("octo/hello#1", {"n": 1}), digest="abc123")
    other = store.record_delivery("d-3", "issues", "queued", ("octo/hello#1", {"n": 2}), digest="def456")
    assert isinstance(first, int) and replay is False and isinstance(other, int)
    assert store.counts()["queued"] == 2


def test_concurrent_redeliveries_make_one_job_each(store: JobStore) -> None:
    results: dict[str, list] = {f"d{i}": [] for i in range(40)}
    lock = threading.Lock()

    def deliver() -> None:
        for delivery in results:
            value = store.record_delivery(delivery, "issues", "queued", ("octo/hello#1", {"d": delivery}))
            with lock:
                results[delivery].append(value)

    threads = [threading.Thread(target=deliver) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for values in results.values():
        (job_id,) = [v for v in values if v is not False]
        assert type(job_id) is int
    assert store.counts()["queued"] == 40


def test_unknown_job_and_bad_state(store: JobStore) -> None:
    with pytest.raises(KeyError):
        store.job(12345)
    (job_id,) = enqueue(store)
    job = store.claim("w")
    with pytest.raises(ValueError):
        store.finish(job.id, "w", "queued")
    assert store.job(job_id).state == "running"


WRITER = """
import sys
from tests.support.stores import open_at
store = open_at(sys.argv[1])
for i in range(100000):
    job_id = store.record_delivery(f"delivery-{i}", "issues", "queued", (f"octo/hello#{i % 7}", {"i": i}))
    print(f"delivery-{i} {job_id}", flush=True)
"""


def test_acknowledged_deliveries_survive_sigkill(store_factory: StoreFactory) -> None:
    child = python(WRITER, store_factory.location)
    acknowledged = []
    for line in child.stdout:
        acknowledged.append(line.split())
        if len(acknowledged) == 300:
            break
    assert len(acknowledged) == 300, "the writer stopped before its 300th delivery (its stderr is above)"
    child.send_signal(signal.SIGKILL)
    child.wait()
    acknowledged += [line.split() for line in child.stdout.read().splitlines() if len(line.split()) == 2]
    store = store_factory()
    for delivery, job_id in acknowledged:
        assert store.job(int(job_id)).delivery_id == delivery
        assert store.record_delivery(delivery, "issues", "queued") is False


def test_oldest_job_first_and_claim_fields(store: JobStore) -> None:
    ids = [enqueue(store, f"octo/hello#{n}")[0] for n in range(3)]
    job = store.claim("w1")
    assert isinstance(job, JobRecord)
    assert (job.id, job.state, job.attempts) == (ids[0], "running", 1)
    assert [store.claim("w1").id, store.claim("w1").id, store.claim("w1")] == [ids[1], ids[2], None]


def test_claims_are_exclusive_across_threads(store_factory: StoreFactory) -> None:
    store = store_factory(lease_s=60)  # exclusive while leases live: none may expire during the test
    for n in range(200):
        enqueue(store, f"octo/hello#{n}")
    claimed: list[int] = []
    lock = threading.Lock()

    def drain(worker: str) -> None:
        while (job := store.claim(worker)) is not None:
            with lock:
                claimed.append(job.id)

    threads = [threading.Thread(target=drain, args=(f"w{n}",)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(claimed) == list(range(1, 201))


CLAIMER = """
import sys, time
from tests.support.stores import open_at
store = open_at(sys.argv[1], lease_s=60)
print("ready", flush=True)
sys.stdin.readline()
while (job := store.claim(sys.argv[2])) is not None:
    print(job.id, flush=True)
    time.sleep(0.001)
"""


def test_claims_are_exclusive_across_processes(store_factory: StoreFactory) -> None:
    store = store_factory(lease_s=60)
    for n in range(200):
        store.record_delivery(f"d{n}", "issues", "queued", (f"octo/hello#{n}", {}))
    children = [python(CLAIMER, store_factory.location, f"proc{n}", stdin=subprocess.PIPE) for n in range(4)]
    for child in children:
        assert child.stdout.readline() == "ready\n"
    for child in children:  # start them together
        child.stdin.write("go\n")
        child.stdin.flush()
    claimed, busy = [], 0
    for child in children:
        out, _ = child.communicate(timeout=30)
        assert child.returncode == 0
        claimed += [int(line) for line in out.split()]
        busy += bool(out.split())
    assert busy >= 2, "the processes did not overlap: the test proved nothing"
    assert sorted(claimed) == list(range(1, 201))
    assert store.counts() == {"queued": 0, "running": 200, "done": 0, "failed": 0}


def test_one_running_job_per_key(store: JobStore) -> None:
    first, second = enqueue(store, "octo/hello#7", n=2)
    (other,) = enqueue(store, "octo/hello#8")
    assert store.claim("w1").id == first
    assert store.claim("w2").id == other  # the second job of #7 waits; other keys do not
    assert store.claim("w2") is None
    assert store.finish(first, "w1", "done", result={"pr": 1})
    assert store.claim("w2").id == second


def test_an_expired_lease_is_claimed_again(store: JobStore) -> None:
    (job_id,) = enqueue(store)
    assert store.claim("dead").attempts == 1
    assert store.claim("w2") is None
    time.sleep(0.6)
    job = store.claim("w2")
    assert (job.id, job.attempts) == (job_id, 2)
    assert not store.heartbeat(job_id, "dead")
    assert not store.finish(job_id, "dead", "done")
    assert store.finish(job_id, "w2", "done", result={"ok": True})
    assert store.job(job_id).result == {"ok": True}


def test_a_job_whose_worker_dies_every_time_is_given_up(store_factory: StoreFactory) -> None:
    store = store_factory(lease_s=0.2, max_attempts=2)
    (job_id,) = enqueue(store)
    (blocked,) = enqueue(store)  # same key: waits while the first holds a live lease
    assert store.claim("dead1").id == job_id
    time.sleep(0.25)
    assert store.take_exhausted("reaper") == []
    assert store.claim("dead2").attempts == 2
    time.sleep(0.25)
    assert store.claim("w").id == blocked  # exhausted: it no longer blocks its key
    (gone,) = store.take_exhausted("reaper")
    assert (gone.id, gone.state, gone.attempts) == (job_id, "failed", 2)
    assert gone.error == "gave up after 2 attempts: the worker died each time"
    assert store.take_exhausted("reaper") == []
    assert store.job(job_id).state == "failed"
    assert store.claim("w") is None


def test_release_gives_the_job_back_without_counting_the_attempt(store: JobStore) -> None:
    (job_id,) = enqueue(store)
    job = store.claim("w1")
    store.release(job_id, "someone-else")  # not theirs: no effect
    assert store.job(job_id).state == "running"
    store.release(job_id, "w1")
    assert store.job(job_id).state == "queued"
    again = store.claim("w2")
    assert (again.id, again.attempts) == (job.id, 1)


def test_a_deferred_job_waits_its_delay_then_runs_as_its_next_attempt(store_factory: StoreFactory) -> None:
    store = store_factory(lease_s=30, max_attempts=3)
    (job_id,) = enqueue(store)
    store.claim("w1")
    assert store.record_call(job_id, "w1", "fc-1")  # a Modal call that returned asking to run again
    assert not store.defer(job_id, "someone-else", 0.3, "GitHub did not answer")  # only the lease holder
    assert store.defer(job_id, "w1", 0.3, "GitHub did not answer: 502")
    deferred = store.job(job_id)
    assert (deferred.state, deferred.error, deferred.call_id) == ("running", "GitHub did not answer: 502", None)
    assert not store.heartbeat(job_id, "w1")  # held by no one
    assert store.claim("w2") is None  # not before its delay, though its 30 s lease would still run
    time.sleep(0.4)
    again = store.claim("w2")
    assert (again.id, again.attempts, again.call_id) == (job_id, 2, None)  # a new attempt, a new call
    assert store.finish(job_id, "w2", "done")
    assert store.job(job_id).error is None


def test_a_recorded_call_stays_with_the_job_and_only_a_new_one_is_an_attempt(store_factory: StoreFactory) -> None:
    store = store_factory(lease_s=0.2, max_attempts=2)
    (job_id,) = enqueue(store)
    assert store.claim("w1").call_id is None
    assert not store.record_call(job_id, "someone-else", "fc-1")  # only the lease holder records
    assert store.record_call(job_id, "w1", "fc-1")
    time.sleep(0.25)  # w1 died; its call may still run
    taken = store.claim("w2")
    assert (taken.id, taken.call_id, taken.attempts) == (job_id, "fc-1", 1)  # taking over is no attempt
    store.release(job_id, "w2")  # a release keeps the call and counts nothing
    assert (store.job(job_id).state, store.job(job_id).call_id, store.job(job_id).attempts) == ("queued", "fc-1", 1)
    assert store.claim("w3").attempts == 1
    assert store.record_call(job_id, "w3", "fc-1")  # the same call again: still one attempt
    assert store.record_call(job_id, "w3", "fc-2")  # fc-1 was gone: a second start
    assert store.job(job_id).attempts == 2
    time.sleep(0.25)
    assert store.take_exhausted("reaper") == []  # its claimer asks the call, not the store
    last = store.claim("w4")  # out of attempts, but fc-2 may still run
    assert (last.call_id, last.attempts) == ("fc-2", 2)
    assert store.finish(job_id, "w4", "done", result={"ok": True})
    assert store.job(job_id).call_id == "fc-2"


def test_heartbeats_keep_a_long_job(store: JobStore, store_factory: StoreFactory) -> None:
    (job_id,) = enqueue(store)
    store.claim("w1")
    other = store_factory(lease_s=0.5)  # as another process would
    for _ in range(8):
        time.sleep(0.15)
        assert store.heartbeat(job_id, "w1")
        assert other.claim("w2") is None
    assert store.finish(job_id, "w1", "failed", error="boom")
    assert (store.job(job_id).state, store.job(job_id).error) == ("failed", "boom")


def test_counts_and_health(store: JobStore) -> None:
    enqueue(store, n=2)
    enqueue(store, "octo/other#1")
    enqueue(store, "octo/third#1", n=2)
    store.finish(store.claim("w").id, "w", "done")
    store.finish(store.claim("w").id, "w", "failed", error="boom")
    store.claim("w")
    assert store.counts() == {"queued": 2, "running": 1, "done": 1, "failed": 1}
    assert store.writable()
    store.close()
    assert not store.writable()


def test_concurrent_claimers_never_run_two_jobs_of_one_key(store_factory: StoreFactory) -> None:
    store = store_factory(lease_s=60)
    for n in range(60):
        enqueue(store, f"octo/hello#{n % 3}")
    running: set[str] = set()
    overlaps: list[str] = []
    lock = threading.Lock()

    def hold(job: JobRecord) -> None:
        with lock:
            if job.key in running:
                overlaps.append(job.key)
            running.add(job.key)
        time.sleep(0.002)
        with lock:
            running.discard(job.key)

    assert claim_until_empty([store] * 8, hold) == list(range(1, 61))
    assert overlaps == []


def test_runs_filters_by_repository_and_state_newest_first(store: JobStore) -> None:
    a1, b1, a2 = enqueue(store, "octo/hello#1")[0], enqueue(store, "other/repo#1")[0], enqueue(store, "octo/hello#2")[0]
    store.finish(store.claim("w").id, "w", "done")
    assert [j.id for j in store.runs()] == [a2, b1, a1]
    assert [j.id for j in store.runs(1)] == [a2]
    assert [j.id for j in store.runs(repos=["Octo/Hello"])] == [a2, a1]
    assert [j.id for j in store.runs(repos=["octo/hello"], state="queued")] == [a2]
    assert [j.id for j in store.runs(state="done")] == [a1]
    assert store.runs(repos=[]) == []


def test_runs_go_page_by_page_each_job_once_whatever_the_filters(store: JobStore) -> None:
    ids = [enqueue(store, f"{owner}/r#{n}")[0] for n in range(12) for owner in ("a", "b", "c")]
    for _ in range(10):
        store.finish(store.claim("w").id, "w", "done")
    for repos, state in ((None, None), (["A/r", "c/r"], None), (None, "queued"), (["b/r"], "done")):
        pages, before = [], None
        while page := store.runs(4, repos=repos, state=state, before=before):
            pages.append([j.id for j in page])
            before = page[-1].id
        listed = [i for p in pages for i in p]
        wanted = [j.id for j in store.runs(1000, repos=repos, state=state)]
        assert listed == wanted == sorted(wanted, reverse=True) and all(len(p) <= 4 for p in pages)
        assert set(wanted) <= set(ids) and wanted


def test_a_store_keeps_the_id_its_first_open_drew_and_its_jobs_carry_it(store_factory: StoreFactory) -> None:
    first = store_factory()
    [job_id] = enqueue(first)
    again = store_factory()
    assert re.fullmatch(r"[0-9a-f]{16}", first.store_id) and again.store_id == first.store_id
    claimed = again.claim("w")
    assert claimed is not None and claimed.store_id == first.store_id
    assert {j.store_id for j in (first.job(job_id), *first.runs(), *again.take_exhausted("w"))} == {first.store_id}


# -- SQLite's own ---------------------------------------------------------


def test_a_page_of_runs_reads_an_index_in_order_never_sorts_the_table(tmp_path: Path) -> None:
    import sqlite3

    Store(tmp_path / "jobs.db").close()  # the schema, migrated
    db = sqlite3.connect(tmp_path / "jobs.db")
    for sql, index in ((RUNS_PAGE.format(columns="id", and_state=" AND state = 'failed'"), "jobs_failed"),
                       (RUNS_PAGE.format(columns="id", and_state=" AND state = 'queued' AND state IN ('queued', "
                                                                 "'running')"), "jobs_open"),
                       (REPO_RUN_IDS.format(and_state=""), "jobs_repo")):
        plan = " ".join(row[-1] for row in db.execute(f"EXPLAIN QUERY PLAN {sql}", {
            "before": 10, "limit": 5, "repo": "a/r"}))
        assert "TEMP B-TREE" not in plan and index in plan, plan
    claim = " ".join(row[-1] for row in db.execute(f"EXPLAIN QUERY PLAN {RUNNABLE}", {
        "now": 0, "max_attempts": 3, "per_installation": 0, "per_repo": 0}))
    assert "USING INDEX jobs_open" in claim, claim  # the claim reads the open jobs, never the whole table
    for sql in (TURNS, QUEUED_OF.format(columns="id")):  # the queue's front: probes, never a scan of every run
        plan = " ".join(row[-1] for row in db.execute(f"EXPLAIN QUERY PLAN {sql}", {"installation": "1", "upto": 5}))
        assert "SCAN jobs" not in plan and "TEMP B-TREE" not in plan and "jobs_queued" in plan, plan
    db.close()


def test_a_store_written_before_body_digests_opens_and_dedupes(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "old.db"
    old = sqlite3.connect(path)  # the schema as released before the `bodies` table
    old.executescript("""
        CREATE TABLE deliveries (id TEXT PRIMARY KEY, event TEXT NOT NULL, outcome TEXT NOT NULL,
                                 received_at REAL NOT NULL) WITHOUT ROWID;
        CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, delivery_id TEXT, key TEXT NOT NULL,
            payload TEXT NOT NULL, state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed')),
            attempts INTEGER NOT NULL DEFAULT 0, created_at REAL NOT NULL, updated_at REAL NOT NULL,
            lease_owner TEXT, lease_expires REAL, error TEXT, result TEXT);
        INSERT INTO deliveries VALUES ('d-old', 'issues', 'queued', 1.0);
        INSERT INTO jobs (delivery_id, key, payload, state, created_at, updated_at)
            VALUES ('d-old', 'octo/hello#1', '{"n": 1}', 'queued', 1.0, 1.0);
    """)
    old.close()
    store = Store(path)
    try:
        assert store.job(1).payload == {"n": 1}
        assert store.record_delivery("d-old", "issues", "queued", ("octo/hello#1", {}), digest="x") is False
        assert isinstance(store.record_delivery("d-new", "issues", "queued", ("octo/hello#2", {}), digest="y"), int)
        assert store.record_delivery("d-newer", "issues", "queued", ("octo/hello#2", {}), digest="y") is False
        assert store.counts()["queued"] == 2
    finally:
        store.close()


def test_a_store_written_before_call_ids_gains_them_and_a_newer_one_is_refused(tmp_path: Path) -> None:
    import sqlite3

    from bot.jobs.sqlite import MIGRATIONS

    path = tmp_path / "jobs.sqlite3"
    Store(path).close()
    old = sqlite3.connect(path)  # back to the file as released before versioning: no call_id, user_version 0
    old.executescript("DROP INDEX jobs_turns; DROP INDEX jobs_queued; ALTER TABLE jobs DROP COLUMN installation;"
                      "ALTER TABLE jobs DROP COLUMN claimed_at; ALTER TABLE jobs DROP COLUMN note;"
                      "ALTER TABLE jobs DROP COLUMN call_id; PRAGMA user_version = 0;"
                      "INSERT INTO jobs (delivery_id, key, payload, state, created_at, updated_at) "
                      "VALUES ('d-old', 'octo/hello#1', '{}', 'queued', 1.0, 1.0);")
    old.close()
    store = Store(path, lease_s=60)
    try:
        job = store.claim("w")
        assert (job.delivery_id, job.call_id, job.installation) == ("d-old", None, "octo")
        assert store.record_call(job.id, "w", "fc-1") and store.job(job.id).call_id == "fc-1"
    finally:
        store.close()
    newer = sqlite3.connect(path)
    newer.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    newer.close()
    with pytest.raises(StoreError, match="newer than this decode-bot"):
        Store(path)


def test_two_store_files_draw_two_ids(tmp_path: Path) -> None:
    one, two = Store(tmp_path / "one.sqlite3"), Store(tmp_path / "two.sqlite3")
    try:
        assert one.store_id != two.store_id
    finally:
        one.close()
        two.close()


def test_a_store_error_says_what_failed(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(StoreError, match="DECODE_DATA_DIR"):
        Store(tmp_path / "file" / "jobs.db")
