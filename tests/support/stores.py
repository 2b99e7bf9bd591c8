"""Job stores for the conformance suite: the same tests against SQLite and PostgreSQL.

`store_factory` is parametrized over both kinds; `postgres_factory` is PostgreSQL only. A factory
opens stores at one location through `bot.jobs.sqlite.open_store`, as a process does, and child processes
open the same location with `open_at(location)`.

PostgreSQL is found at DECODE_TEST_DATABASE_URL (default: the role and database scripts/setup makes).
Each test module gets a database of its own (random name, dropped after) and each test a schema of its
own in it, so parallel pytest-xdist workers and reruns never see each other's rows. When the server is
unreachable the PostgreSQL variants fail, saying to run scripts/setup: CI installs it, nothing skips.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg
import pytest

from bot.config import Settings
from bot.jobs.sqlite import open_store
from bot.jobs.store import JobRecord, JobStore

DEFAULT_TEST_DATABASE_URL = "postgresql://decode:decode@127.0.0.1:5432/decode_test"
KINDS = ("sqlite", "postgres")


def postgres_test_url() -> str:
    """The server and maintenance database the PostgreSQL tests use."""
    return os.environ.get("DECODE_TEST_DATABASE_URL") or DEFAULT_TEST_DATABASE_URL


def with_database(url: str, database: str, schema: str | None = None) -> str:
    """`url` pointed at `database`, with `schema` first on the search path when given."""
    parts = urlsplit(url)
    query = f"options={quote(f'-csearch_path={schema}')}" if schema else ""
    return urlunsplit((parts.scheme, parts.netloc, f"/{database}", query, ""))


def open_at(location: str, *, lease_s: float = 0.5, max_attempts: int = 3, per_installation: int = 0,
            per_repo: int = 0) -> JobStore:
    """The store at `location` (a PostgreSQL URL, or the data dir holding jobs.sqlite3), opened as
    `decode serve` opens its own, with those caps of running jobs; child processes of the tests use it."""
    postgres = location.startswith(("postgresql://", "postgres://"))
    settings = Settings(data_dir=Path(location) if not postgres else Path("/nonexistent"),
                        database_url=location if postgres else None, lease_s=lease_s, max_attempts=max_attempts,
                        max_running_per_installation=per_installation, max_running_per_repo=per_repo)
    return open_store(settings.store)


def claim_until_empty(stores: Sequence[JobStore], hold: Callable[[JobRecord], None], *,
                      within_s: float = 30) -> list[int]:
    """Claimers racing for the queue, one thread per store in `stores` (worker `w0`, `w1`, ...; the same store
    may be listed more than once): each takes jobs until none is queued, hands each to `hold` (which records what
    it sees while the job runs) and finishes it as done. Returns the ids finished, in id order."""
    finished: list[int] = []
    lock = threading.Lock()

    def claim(store: JobStore, worker: str) -> None:
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            job = store.claim(worker)
            if job is None:
                if store.counts()["queued"] == 0:
                    return
                time.sleep(0.002)
                continue
            hold(job)
            with lock:
                finished.append(job.id)
            assert store.finish(job.id, worker, "done")

    threads = [threading.Thread(target=claim, args=(store, f"w{n}")) for n, store in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sorted(finished)


@dataclass
class StoreFactory:
    """Opens stores at one location; every store it opened is closed after the test."""

    kind: str  # sqlite | postgres
    location: str  # what `open_at` takes, in this process or a child
    opened: list[JobStore] = field(default_factory=list)

    def __call__(self, *, lease_s: float = 0.5, max_attempts: int = 3, per_installation: int = 0,
                 per_repo: int = 0) -> JobStore:
        store = open_at(self.location, lease_s=lease_s, max_attempts=max_attempts,
                        per_installation=per_installation, per_repo=per_repo)
        self.opened.append(store)
        return store

    def close_all(self) -> None:
        for store in self.opened:
            store.close()


@pytest.fixture(scope="module")
def postgres_database() -> Iterator[str]:
    """A database of this test module's own on the test server (its URL), dropped afterwards."""
    admin_url = postgres_test_url()
    try:
        admin = psycopg.connect(admin_url, autocommit=True, connect_timeout=5)
    except psycopg.Error as e:
        problem = str(e).strip()
    else:
        problem = None
    if problem is not None:
        parts = urlsplit(admin_url)  # shown without its password
        where = f"{parts.scheme}://{parts.username or ''}@{parts.hostname}:{parts.port or 5432}{parts.path}"
        pytest.fail(f"PostgreSQL for the store tests is unreachable at {where} ({problem}): run scripts/setup "
                    "as root (it installs and starts PostgreSQL and creates the test role), or set "
                    "DECODE_TEST_DATABASE_URL", pytrace=False)
    name = f"decode_t_{secrets.token_hex(6)}"
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield with_database(admin_url, name)
        finally:
            drop_database(admin, name)


def drop_database(admin: psycopg.Connection, name: str, tries: int = 40) -> None:
    """Drop database `name`, its sessions ended. PostgreSQL 15 refuses FORCE while an autovacuum worker (not a
    role the test role may signal) is in it, so that refusal is tried again: the worker is done within seconds."""
    for attempt in range(tries):
        try:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            return
        except psycopg.errors.InsufficientPrivilege:
            if attempt == tries - 1:
                raise
            time.sleep(0.25)


def postgres_location(database_url: str) -> str:
    """A fresh schema in the module's database, as a URL whose search path starts with it."""
    schema = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    return with_database(database_url, urlsplit(database_url).path.lstrip("/"), schema)


def factory_of(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    if kind == "postgres":
        return StoreFactory(kind, postgres_location(request.getfixturevalue("postgres_database")))
    return StoreFactory(kind, str(tmp_path / "data"))


@pytest.fixture(params=KINDS)
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """A StoreFactory for each kind of job store: the test runs once against each."""
    factory = factory_of(request.param, request, tmp_path)
    yield factory
    factory.close_all()


@pytest.fixture
def postgres_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """A StoreFactory for PostgreSQL only."""
    factory = factory_of("postgres", request, tmp_path)
    yield factory
    factory.close_all()
