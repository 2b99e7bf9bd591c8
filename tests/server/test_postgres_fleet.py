"""Two `decode serve` and two `decode worker` processes on one PostgreSQL job store, as on several hosts:
200 signed deliveries spread over both servers, GitHub's redeliveries among them, every job run once; then
a worker killed with SIGKILL mid-run, whose job the other worker finishes with one PR.

The servers are intake only (DECODE_WORKERS=0), as behind a load balancer with workers apart. Each of the
180 jobs is a light but whole run (clone from the fake GitHub, local sandbox, a scripted agent that finds
nothing to change, the tracking comment); DECODE_FLEET_ISSUES sets another count (20 redeliveries per 180).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest

from tests.server.conftest import delivery
from tests.server.test_serve import NOTES, labeled
from tests.support.cli import DECODE
from tests.support.server import NAME, OWNER, Server, env, wait_for  # noqa: F401 (fixture)
from tests.support.stores import StoreFactory

ISSUES = int(os.environ.get("DECODE_FLEET_ISSUES") or 180)
REPEATS = ISSUES // 9  # redeliveries of earlier delivery ids
WAIT_S = 60 + 2 * ISSUES
NOTHING = [[{"type": "text", "text": "Nothing to change here."}]]
LEASE_S = 6


def first_turns(fake_anthropic, title: str) -> int:
    """How many runs began a conversation about the issue `title` (one first request each)."""
    return sum(1 for r in fake_anthropic.requests if r.body and len(r.body["messages"]) == 1
               and title in str(r.body["messages"][0]["content"]))


@pytest.mark.timeout(WAIT_S + 240)
def test_two_servers_and_two_workers_run_each_job_once(env, fake_github, fake_anthropic, tmp_path: Path,
                                                       postgres_factory: StoreFactory) -> None:
    fake_anthropic.script(NOTHING, by_position=True)

    def host(n: int, **more: str) -> dict[str, str]:  # a host of its own: its data dir; the database is shared
        return {**env, "DECODE_DATABASE_URL": postgres_factory.location, "DECODE_DATA_DIR": str(tmp_path / f"host{n}"),
                "DECODE_LEASE_SECONDS": str(LEASE_S),
                "DECODE_GITHUB_WRITES_PER_MINUTE": "0",  # 180 jobs of one owner at once: GitHub's 80 writes a
                **more}                                  # minute would pace them over 20 min; the fake has no limit

    servers = [Server(host(n, DECODE_WORKERS="0"), tmp_path / f"serve{n}.log") for n in range(2)]
    workers = []
    for n in range(2):
        with open(tmp_path / f"worker{n}.log", "ab") as out:
            workers.append(subprocess.Popen([DECODE, "worker"], env=host(2 + n, DECODE_WORKERS="4"), stdout=out,
                                            stderr=out))
    store = postgres_factory()
    try:
        titles = [f"Issue {i} of the fleet." for i in range(ISSUES)]
        numbers = [fake_github.add_issue(OWNER, NAME, title, "Please look.", user="alice") for title in titles]
        sent = [delivery("issues", labeled(fake_github, number)) for number in numbers]
        sends = sent + random.Random(15).sample(sent, REPEATS)  # a redelivery keeps its id and body
        random.Random(16).shuffle(sends)
        with ThreadPoolExecutor(8) as pool:
            statuses = list(pool.map(lambda i: servers[i % 2].send(*sends[i]), range(len(sends))))
        assert statuses.count(202) == ISSUES and len(statuses) == ISSUES + REPEATS
        assert all(status < 300 for status in statuses), statuses
        wait_for(lambda: store.counts()["done"] + store.counts()["failed"] == ISSUES, timeout=WAIT_S,
                 what=f"{ISSUES} jobs to finish")
        jobs = store.runs(1000)
        assert [(job.key, job.error) for job in jobs if job.state != "done"] == []
        assert store.counts() == {"queued": 0, "running": 0, "done": ISSUES, "failed": 0}
        assert sorted(job.key for job in jobs) == sorted(f"{OWNER}/{NAME}#{n}".lower() for n in numbers)
        assert all(job.attempts == 1 for job in jobs)
        assert [first_turns(fake_anthropic, title) for title in titles] == [1] * ISSUES, "each job ran once"
        runs = {n: [d.name for d in (tmp_path / f"host{n}" / "runs").glob("*")] for n in range(4)}
        assert runs[0] == runs[1] == [], "the servers only take deliveries"
        assert len(runs[2]) + len(runs[3]) == ISSUES and runs[2] and runs[3], runs  # one run dir per job

        # A worker killed mid-run: its job's lease expires and the other worker runs it again, to one PR.
        fake_anthropic.script(NOTES, by_position=True)
        held = fake_anthropic.pause(1)  # the second turn: the first tool call has run
        title = "Write the notes, even if a worker dies."
        number = fake_github.add_issue(OWNER, NAME, title, "Please.", user="alice")
        assert servers[0].send(*delivery("issues", labeled(fake_github, number))) == 202
        assert held.reached.wait(60), "the job reached its second turn"
        with psycopg.connect(postgres_factory.location) as db:
            [(owner,)] = db.execute("SELECT lease_owner FROM jobs WHERE state = 'running'").fetchall()
        [killed] = [w for w in workers if owner.split(":")[1] == str(w.pid)]
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=30)
        held.release()  # the dead worker's request gets no answer
        wait_for(lambda: store.counts()["done"] == ISSUES + 1, timeout=LEASE_S * 3 + 60,
                 what="the killed worker's job to be finished by the other")
        [job] = [j for j in store.runs(1000) if j.key == f"{OWNER}/{NAME}#{number}".lower()]
        assert job.state == "done" and job.attempts == 2, job
        assert first_turns(fake_anthropic, title) == 2, "one run died, one finished"
        pulls = fake_github.pulls(OWNER, NAME)
        assert [int(pr["body"].split("Fixes #")[1].split()[0]) for pr in pulls] == [number], "one PR"
        survivor = 3 - workers.index(killed)
        assert len(list((tmp_path / f"host{survivor}" / "runs").glob("*"))) == len(runs[survivor]) + 1
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.terminate()
        for server in servers:
            server.stop()
        for worker in workers:
            worker.wait(timeout=60)
