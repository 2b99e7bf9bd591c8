"""Two `decode serve` and two `decode worker` processes on one PostgreSQL job store, as on several hosts:
signed deliveries spread over both servers, GitHub's redeliveries among them, and every job run once.

Each job is a whole run (clone, local sandbox, scripted agent, PR) against the fake GitHub, so the suite
sends 36 issues plus 4 redeliveries (about 50 s on a 2-core machine). DECODE_FLEET_ISSUES=180 sends the
180 + 20 of issue 15; there the fake GitHub is the bottleneck: its clone and publish endpoints slow down as
branches and pulls pile up (about 60 s per job past 150 pulls), and the run outlasts its wait.
"""

from __future__ import annotations

import os
import random
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.server.conftest import delivery
from tests.server.test_serve import NOTES, labeled
from tests.support.cli import DECODE
from tests.support.server import NAME, OWNER, Server, env, wait_for  # noqa: F401 (fixture)
from tests.support.stores import StoreFactory

ISSUES = int(os.environ.get("DECODE_FLEET_ISSUES") or 36)
REPEATS = ISSUES // 9  # redeliveries of earlier delivery ids
WAIT_S = 60 + 3 * ISSUES


@pytest.mark.timeout(WAIT_S + 120)
def test_two_servers_and_two_workers_run_each_job_once(env, fake_github, fake_anthropic, tmp_path: Path,
                                                       postgres_factory: StoreFactory) -> None:
    fake_anthropic.script(NOTES, by_position=True)

    def host(n: int) -> dict[str, str]:  # a host of its own: its data dir; the database is shared
        return {**env, "DECODE_DATABASE_URL": postgres_factory.location, "DECODE_DATA_DIR": str(tmp_path / f"host{n}"),
                "DECODE_LEASE_SECONDS": "30"}

    servers = [Server(host(n), tmp_path / f"serve{n}.log") for n in range(2)]
    workers = []
    for n in range(2):
        with open(tmp_path / f"worker{n}.log", "ab") as out:
            workers.append(subprocess.Popen([DECODE, "worker"], env=host(2 + n), stdout=out, stderr=out))
    try:
        numbers = [fake_github.add_issue(OWNER, NAME, f"Write notes {i}", "Please.", user="alice")
                   for i in range(ISSUES)]
        sent = [delivery("issues", labeled(fake_github, number)) for number in numbers]
        sends = sent + random.Random(15).sample(sent, REPEATS)  # a redelivery keeps its id and body
        random.Random(16).shuffle(sends)
        with ThreadPoolExecutor(8) as pool:
            statuses = list(pool.map(lambda i: servers[i % 2].send(*sends[i]), range(len(sends))))
        assert statuses.count(202) == ISSUES and len(statuses) == ISSUES + REPEATS
        assert all(status < 300 for status in statuses), statuses
        store = postgres_factory()
        wait_for(lambda: store.counts()["done"] + store.counts()["failed"] == ISSUES, timeout=WAIT_S,
                 what=f"{ISSUES} jobs to finish")
        jobs = store.runs(1000)
        assert store.counts() == {"queued": 0, "running": 0, "done": ISSUES, "failed": 0}
        assert sorted(job.key for job in jobs) == sorted(f"{OWNER}/{NAME}#{n}".lower() for n in numbers)
        assert all(job.attempts == 1 for job in jobs)
        pulls = fake_github.pulls(OWNER, NAME)
        assert len(pulls) == ISSUES
        assert sorted(int(pr["body"].split("Fixes #")[1].split()[0]) for pr in pulls) == sorted(numbers)
        runs = {n: [d.name for d in (tmp_path / f"host{n}" / "runs").glob("*")] for n in range(4)}
        assert sum(len(names) for names in runs.values()) == ISSUES, runs  # one run directory per job, anywhere
        assert all(runs.values()), f"a process ran no job: {runs}"
    finally:
        for worker in workers:
            worker.terminate()
        for server in servers:
            server.stop()
        for worker in workers:
            worker.wait(timeout=60)
