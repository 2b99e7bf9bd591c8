"""The fair queue, against SQLite and PostgreSQL (`store_factory`): claims round-robin across
installations, the caps per installation and per repository held across concurrent claimers, and the
position and reason each waiting job is given (bot/jobs/queue.py)."""

from __future__ import annotations

import threading
import time
from collections import Counter

from bot.jobs.queue import FREE_WORKER, ordinal, page, place, standing, waiting
from bot.jobs.store import JobRecord, JobStore
from tests.support.stores import StoreFactory, claim_until_empty


def enqueue(store: JobStore, key: str, installation: int | None) -> int:
    payload = {"k": key, "installation": installation}
    return store.record_delivery(f"d-{time.monotonic_ns()}", "issues", "queued", (key, payload))


def ten_jobs(store: JobStore) -> None:
    """Five jobs of installation 1, then five of installation 2: first come would run all of 1 first."""
    for n in range(1, 6):
        enqueue(store, f"octo/calendar#{n}", 1)
    for n in range(1, 6):
        enqueue(store, f"acme/web#{n}", 2)


def test_with_a_cap_of_one_per_installation_ten_jobs_across_two_installations_alternate(
        store_factory: StoreFactory) -> None:
    store = store_factory(lease_s=60, per_installation=1)
    ten_jobs(store)
    order: list[str] = []
    while store.counts()["queued"]:
        first, second = store.claim("w1"), store.claim("w2")
        assert store.claim("w3") is None  # both installations are at their cap
        line = waiting(store)
        assert [w.position for w in line] == list(range(1, len(line) + 1))
        assert [w.job.installation for w in line] == ["1", "2"] * (len(line) // 2)
        assert all(w.reason == "waiting: its installation already has 1 run going (the cap is 1)" for w in line)
        for job, worker in ((first, "w1"), (second, "w2")):
            order.append(job.installation)
            assert store.finish(job.id, worker, "done")
    assert order == ["1", "2"] * 5


def test_without_caps_one_worker_still_takes_installations_in_turn(store_factory: StoreFactory) -> None:
    store = store_factory(lease_s=60)
    ten_jobs(store)
    assert [w.job.key for w in waiting(store)][:4] == ["octo/calendar#1", "acme/web#1", "octo/calendar#2",
                                                       "acme/web#2"]
    order = []
    while (job := store.claim("w")) is not None:
        order.append(job.key)
        assert store.finish(job.id, "w", "done")
    assert order == [f"{repo}#{n}" for n in range(1, 6) for repo in ("octo/calendar", "acme/web")]


def test_the_installation_that_ran_least_recently_goes_first(store_factory: StoreFactory) -> None:
    store = store_factory(lease_s=60)
    enqueue(store, "octo/calendar#1", 1)
    job = store.claim("w")
    assert store.finish(job.id, "w", "done")
    enqueue(store, "octo/calendar#2", 1)  # older than the next one, but its installation just ran
    enqueue(store, "acme/web#1", 2)
    enqueue(store, "solo/tool#1", None)  # no installation: its owner counts as one
    assert [(w.job.key, w.job.installation) for w in waiting(store)] == [
        ("acme/web#1", "2"), ("solo/tool#1", "solo"), ("octo/calendar#2", "1")]
    assert [store.claim("w").key for _ in range(3)] == ["acme/web#1", "solo/tool#1", "octo/calendar#2"]


def test_a_repository_at_its_cap_waits_while_another_of_its_installation_runs(store_factory: StoreFactory) -> None:
    store = store_factory(lease_s=60, per_repo=1)
    enqueue(store, "octo/calendar#1", 1)
    enqueue(store, "octo/calendar#2", 1)
    enqueue(store, "octo/clock#1", 1)
    enqueue(store, "octo/calendar#1", 1)  # the same issue again
    first = store.claim("w")
    assert first.key == "octo/calendar#1"
    line = {w.job.id: w.text for w in waiting(store)}
    assert line == {2: "1st in line; waiting: octo/calendar already has 1 run going (the cap is 1)",
                    3: f"2nd in line; {FREE_WORKER}",
                    4: "3rd in line; waiting: another run on octo/calendar#1 is going"}
    assert standing(store, 3).text == f"2nd in line; {FREE_WORKER}" and standing(store, first.id) is None
    assert store.claim("w").key == "octo/clock#1"
    assert store.claim("w") is None
    assert store.finish(first.id, "w", "done")
    assert store.claim("w").id == 2


def test_concurrent_claimers_never_pass_a_cap(store_factory: StoreFactory) -> None:
    """Eight claimers, each with a store of its own (as on eight hosts), 40 jobs of two installations:
    never more than two of one installation run at once, and every job runs exactly once."""
    stores = [store_factory(lease_s=60, per_installation=2) for _ in range(8)]
    for n in range(40):
        enqueue(stores[0], f"{'octo/calendar' if n % 2 else 'acme/web'}#{n}", n % 2)
    running: Counter[str] = Counter()
    most: Counter[str] = Counter()
    lock = threading.Lock()

    def hold(job: JobRecord) -> None:
        with lock:
            running[job.installation] += 1
            most[job.installation] = max(most[job.installation], running[job.installation])
        time.sleep(0.02)
        with lock:
            running[job.installation] -= 1

    assert claim_until_empty(stores, hold) == list(range(1, 41))
    assert set(most) == {"0", "1"} and max(most.values()) <= 2


def test_a_note_changes_once_per_new_text_and_only_while_queued(store_factory: StoreFactory) -> None:
    one, other = store_factory(lease_s=60), store_factory(lease_s=60)
    job_id = enqueue(one, "octo/calendar#1", 1)
    assert one.note(job_id, "1st in line") is True
    assert other.note(job_id, "1st in line") is False  # another process already told GitHub
    assert other.note(job_id, "2nd in line") is True
    assert one.claim("w").id == job_id
    assert one.note(job_id, "1st in line") is False


def test_ordinals() -> None:
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st", "111th"]


def test_past_the_tenth_place_a_comment_moves_by_tens() -> None:
    assert [place(n) for n in (1, 10, 11, 20, 21, 47)] == [
        "1st in line", "10th in line", "in line behind 10+ jobs", "in line behind 10+ jobs",
        "in line behind 20+ jobs", "in line behind 40+ jobs"]


def test_a_page_of_the_line_reads_its_front_and_matches_the_whole_line(store_factory: StoreFactory) -> None:
    store = store_factory(lease_s=60)
    for n in range(1, 13):  # three installations, 8, 2 and 2 jobs queued, interleaved
        repo, installation = ("octo/calendar", 1) if n % 3 else (("acme/web", 2) if n % 2 else ("solo/tool", None))
        enqueue(store, f"{repo}#{n}", installation)
    store.claim("w")  # installation 1 claimed last: it goes last in each round
    line = waiting(store)
    assert len(store.snapshot(upto=2).queued) == 6  # each installation's oldest two at most
    for after, count, keep in ((0, 4, "/"), (3, 3, "/"), (0, 3, "octo/"), (5, 5, "octo/"), (9, 5, "/")):
        found, more = page(store, after, count, lambda w: w.repo.startswith(keep))
        wanted = [w for w in line if w.position > after and w.repo.startswith(keep)]
        assert [(w.job.id, w.position, w.reason) for w in found] == \
               [(w.job.id, w.position, w.reason) for w in wanted[:count]], (after, count, keep)
        assert more == (bool(found) and found[-1].position < len(line)), (after, count, keep)
