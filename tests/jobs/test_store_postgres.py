"""What only the PostgreSQL job store has: its setting, migrations raced by processes starting together,
claims that skip rows and keys another process is claiming, and errors that keep the password out."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from bot.config import Settings
from bot.core.errors import ConfigError
from bot.jobs.sqlite import Store, open_store
from bot.jobs.postgres import KEY_LOCK, MIGRATIONS, PostgresStore
from bot.jobs.store import StoreError
from tests.support.stores import StoreFactory

ROOT = Path(__file__).resolve().parents[2]


def python(code: str, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", code, *args], env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_the_setting_selects_postgres_and_is_a_secret(tmp_path: Path) -> None:
    url = "postgresql://decode:s3cret-pass@db.internal:5432/decode"
    settings = Settings.from_env({"DECODE_DATABASE_URL": url, "DECODE_DATA_DIR": str(tmp_path)})
    assert settings.store.database_url == url
    assert url in settings.secrets() and "s3cret-pass" in settings.secrets()
    assert "s3cret-pass" not in settings.redactor.redact(f"cannot connect to {url}: password s3cret-pass refused")
    assert Settings.from_env({"DECODE_DATABASE_URL": "postgres://h/db"}).store.database_url == "postgres://h/db"
    assert Settings.from_env({}).store.database_url is None
    with pytest.raises(ConfigError, match="DECODE_DATABASE_URL") as raised:
        Settings.from_env({"DECODE_DATABASE_URL": "mysql://root:hunter22@db/x"})
    assert "hunter22" not in str(raised.value)


def test_open_store_picks_postgres_when_the_url_is_set(postgres_factory: StoreFactory, tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, database_url=postgres_factory.location, lease_s=7.0, max_attempts=5)
    store = open_store(settings.store)
    try:
        assert isinstance(store, PostgresStore) and (store.lease_s, store.max_attempts) == (7.0, 5)
        assert ":decode@" not in store.path and store.path.startswith("postgresql://decode@")
    finally:
        store.close()
    sqlite = open_store(Settings(data_dir=tmp_path).store)
    assert isinstance(sqlite, Store) and sqlite.path == tmp_path / "jobs.sqlite3"
    sqlite.close()


def test_a_wrong_password_is_a_store_error_without_the_password(postgres_factory: StoreFactory) -> None:
    url = postgres_factory.location.replace("decode:decode@", "decode:not-the-password@")
    with pytest.raises(StoreError, match="DECODE_DATABASE_URL") as raised:
        PostgresStore(url, connect_timeout_s=3)
    assert "not-the-password" not in str(raised.value)


MIGRATOR = """
import sys
from bot.jobs.postgres import PostgresStore
sys.stdin.readline()
store = PostgresStore(sys.argv[1])
print(store.applied, flush=True)
store.close()
"""


def test_processes_starting_together_apply_each_migration_once(postgres_factory: StoreFactory) -> None:
    children = [python(MIGRATOR, postgres_factory.location) for _ in range(6)]
    for child in children:  # all imported and waiting: release them together
        child.stdin.write("go\n")
        child.stdin.flush()
    outputs = []
    for child in children:
        out, err = child.communicate(timeout=60)
        assert child.returncode == 0, err
        outputs.append(out.strip())
    versions = list(range(1, len(MIGRATIONS) + 1))
    assert sorted(outputs) == sorted(["[]"] * 5 + [str(versions)])
    store = postgres_factory()
    assert store.applied == []
    with psycopg.connect(postgres_factory.location) as conn:
        assert [v for (v,) in conn.execute("SELECT version FROM schema_migrations ORDER BY version")] == versions


def test_a_schema_newer_than_the_code_is_refused(postgres_factory: StoreFactory) -> None:
    postgres_factory()
    with psycopg.connect(postgres_factory.location, autocommit=True) as conn:
        conn.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (len(MIGRATIONS) + 1,))
    with pytest.raises(StoreError, match="newer than this decode-bot"):
        postgres_factory()


def test_a_claim_skips_a_row_another_process_is_claiming(postgres_factory: StoreFactory) -> None:
    store = postgres_factory(lease_s=60)
    first = store.record_delivery("d1", "issues", "queued", ("octo/hello#1", {}))
    second = store.record_delivery("d2", "issues", "queued", ("octo/hello#2", {}))
    with psycopg.connect(postgres_factory.location) as other:  # mid-claim: holds the row lock of the first
        other.execute("SELECT id FROM jobs WHERE id = %s FOR UPDATE", (first,))
        job = store.claim("w")  # neither waits for the other process nor takes its row
        assert job is not None and job.id == second
        assert store.claim("w") is None
    assert store.claim("w").id == first  # once the other process let go


def test_a_claim_skips_a_key_another_process_is_claiming(postgres_factory: StoreFactory) -> None:
    store = postgres_factory(lease_s=60)
    held = store.record_delivery("d1", "issues", "queued", ("octo/hello#1", {}))
    other_key = store.record_delivery("d2", "issues", "queued", ("octo/hello#2", {}))
    with psycopg.connect(postgres_factory.location) as other:  # another claimer holds the key lock of #1
        other.execute("SELECT pg_advisory_xact_lock(%s, hashtext(current_schema() || ':' || %s))",
                      (KEY_LOCK, "octo/hello#1"))
        assert store.claim("w").id == other_key
        assert store.claim("w") is None
    assert store.claim("w").id == held


def test_a_database_of_the_first_schema_gains_call_ids(postgres_factory: StoreFactory) -> None:
    with psycopg.connect(postgres_factory.location, autocommit=True) as conn:  # as the previous release left it
        conn.execute("CREATE TABLE schema_migrations (version integer PRIMARY KEY, "
                     "applied_at timestamptz NOT NULL DEFAULT now())")
        conn.execute(MIGRATIONS[0].encode())
        conn.execute("INSERT INTO schema_migrations (version) VALUES (1)")
        conn.execute("INSERT INTO jobs (delivery_id, key, payload, state, created_at, updated_at) "
                     "VALUES ('d-old', 'octo/hello#1', '{}', 'queued', 1, 1)")
    store = postgres_factory(lease_s=60)
    assert store.applied == list(range(2, len(MIGRATIONS) + 1))
    job = store.claim("w")
    assert (job.delivery_id, job.call_id) == ("d-old", None)
    assert store.record_call(job.id, "w", "fc-1") and store.job(job.id).call_id == "fc-1"


def test_a_job_queued_by_another_process_wakes_an_idle_runner_at_once(postgres_factory: StoreFactory) -> None:
    """LISTEN/NOTIFY: a worker whose next poll is 30 s away starts a job an intake elsewhere stored now."""
    import threading
    import time

    from bot.jobs.lease import LeaseRunner, Outcome
    from bot.jobs.worker import ThreadExecutor

    worker_store, intake = postgres_factory(), postgres_factory()
    started = threading.Event()
    runner = LeaseRunner(worker_store, ThreadExecutor(lambda job: started.set() or Outcome(result={})), limit=1,
                         poll_s=30)
    runner.start()
    worker_store.watch(runner.wake)
    try:
        time.sleep(0.5)  # its first sweep found nothing, and it listens
        queued = time.monotonic()
        intake.record_delivery("d-wake", "issues", "queued", ("octo/hello#1", {}))
        assert started.wait(5), "the job waited for the poll"
        print(f"woken after {(time.monotonic() - queued) * 1000:.0f} ms")
    finally:
        runner.stop(1)
