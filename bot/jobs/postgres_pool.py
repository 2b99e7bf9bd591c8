"""The PostgreSQL job store's connections (bot/jobs/postgres.py): a small pool of our own, so the store
needs no psycopg_pool dependency."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

MAX_IDLE = 8
PING_AFTER_S = 30.0


class Pool:
    """Connections to one database for any thread: LIFO, at most `MAX_IDLE` kept idle, none shared
    between two threads at once."""

    def __init__(self, url: str, connect_timeout_s: float) -> None:
        self._url = url
        self._timeout = max(1, round(connect_timeout_s))
        self._idle: list[tuple[psycopg.Connection[Any], float]] = []
        self._lock = threading.Lock()
        self._closed = False
        info = conninfo_to_dict(url)
        self.password = str(info["password"]) if info.get("password") else None  # redacted: libpq errors can quote it
        user = f"{info['user']}@" if info.get("user") else ""
        port = f":{info['port']}" if info.get("port") else ""
        self.where = f"postgresql://{user}{info.get('host', 'localhost')}{port}/{info.get('dbname', '')}"

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection for one transaction; closed instead of given back when it raised."""
        conn = self._take()
        try:
            yield conn
        except BaseException:
            conn.close()
            raise
        with self._lock:
            if self._closed or len(self._idle) >= MAX_IDLE or conn.closed:
                conn.close()
            else:
                self._idle.append((conn, time.monotonic()))

    def _take(self) -> psycopg.Connection[Any]:
        while True:
            with self._lock:
                if self._closed:
                    raise psycopg.InterfaceError("the job store was closed")
                if not self._idle:
                    break
                conn, since = self._idle.pop()
            if time.monotonic() - since < PING_AFTER_S:
                return conn
            try:
                conn.execute("SELECT 1")
                return conn
            except psycopg.Error:
                conn.close()  # the server dropped it: try the next, or open a new one
        conn = psycopg.connect(self._url, autocommit=True, connect_timeout=self._timeout,
                               application_name="decode-bot")
        conn.execute("SET synchronous_commit = on")
        return conn

    @property
    def closed(self) -> bool:
        return self._closed

    def listener(self) -> psycopg.Connection[Any]:
        """A connection of its own, outside the pool, for LISTEN."""
        return psycopg.connect(self._url, autocommit=True, connect_timeout=self._timeout)

    def close(self) -> None:
        """Close the idle connections; busy ones close when given back."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn, _ in idle:
            conn.close()
