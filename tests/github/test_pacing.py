"""Writes within GitHub's secondary limits: the pacer's windows, a secondary limit waited out as GitHub says
(never an unsigned push), and many runs' tracking comments together never refused. Against the fake GitHub
in its write-limit mode (403 with `retry-after` past N writes a window, as GitHub answers)."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from bot.github.auth import TokenCredentials
from bot.github.forge import GitHubForge
from bot.github.pacing import WritePacer
from bot.github.retry import GitHubRetry
from bot.github.tracking import Tracker
from tests.github.test_api_commit import app_run, bash, git_commit, git_data_writes, pushes
from tests.support.github_job import NAME, OWNER, REPO, world  # noqa: F401 (fixture)


class Clock:
    """A clock that sleeping moves."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_writes_past_the_window_wait_for_it_and_optional_ones_are_skipped():
    clock = Clock()
    pacer = WritePacer(((4, 60.0),), clock=lambda: clock.now, sleep=clock.sleep)
    assert [pacer.may_write("octo") for _ in range(3)] == [True, True, False]  # half the window for progress
    pacer.acquire("octo")
    pacer.acquire("octo")
    assert clock.slept == []
    pacer.acquire("octo")  # the fifth in a minute waits until the first leaves the window
    assert clock.slept == [61.0]  # a second's margin: it arrives at GitHub after it leaves
    pacer.acquire("other")  # another account's budget is its own
    assert clock.slept == [61.0]


def test_after_github_asks_writes_wait_then_go_one_a_second(caplog):
    clock = Clock()
    pacer = WritePacer(clock=lambda: clock.now, sleep=clock.sleep)
    with caplog.at_level(logging.WARNING):
        pacer.asked("octo", 30.0, "secondary rate limit")
    assert "secondary rate limit for octo: its writes wait 30 s as GitHub asks" in caplog.text
    assert not pacer.may_write("octo")
    pacer.acquire("octo")
    pacer.acquire("octo")
    assert clock.slept == [30.0, 1.0]


def test_a_secondary_limit_on_the_commit_is_waited_out_as_github_says_and_logged(world, caplog):
    fake = world[0]
    fake.inject_secondary_rate_limit("POST", rf"^/repos/{REPO}/git/trees$", retry_after=7)
    sleeps: list[float] = []
    with caplog.at_level(logging.WARNING):
        _, pr = app_run(world, "Take notes", bash("echo signed >> NOTES.md"),
                        retry=GitHubRetry(sleep=sleeps.append))
    assert 7.0 in sleeps
    assert "GitHub answered 403 (secondary rate limit); waiting 7s as it asks" in caplog.text
    head = pr["head"]["sha"]
    assert git_commit(fake, head)["verification"]["verified"] and not pushes(fake)


def test_a_secondary_limit_that_outlasts_the_retries_is_never_turned_into_an_unsigned_push(world):
    fake = world[0]
    fake.inject_secondary_rate_limit("POST", rf"^/repos/{REPO}/git/trees$", retry_after=1, times=50)
    with pytest.raises(AssertionError, match="secondary rate limit held the commit back"):
        app_run(world, "Take notes", bash("echo signed >> NOTES.md"), retry=GitHubRetry(sleep=lambda s: None))
    assert not pushes(fake) and not fake.pulls(OWNER, NAME)
    assert [r.status for r in git_data_writes(fake)] == [403] * 6


def test_many_runs_tracking_comments_together_stay_within_githubs_limit(world):
    fake = world[0]
    fake.limit_writes(12, 2.0)
    forge = GitHubForge(TokenCredentials(fake.token, fake.api_url), retry=GitHubRetry(sleep=lambda s: None),
                        pacer=WritePacer(((12, 2.0),)))
    number = fake.add_issue(OWNER, NAME, "Busy", "", user="alice")
    trackers = [Tracker(forge, REPO, None, footer=f"<!-- run {i} -->", interval_s=0.0) for i in range(8)]
    for i, tracker in enumerate(trackers):
        tracker.start(number, f"<!-- run {i} -->")

    def busy(tracker: Tracker) -> None:  # the 8 posts and 8 moves fill the first window (the window counts 3 s:
        tracker.move("agent")             # 2 s and the margin), so progress (half the window) goes in the next
        deadline = time.monotonic() + 6.0
        while time.monotonic() < deadline:
            tracker.on_event({"type": "model_response", "turn": tracker.turn + 1, "cost_usd": 0.01})
            time.sleep(0.01)
        tracker.finish("done")
    threads = [threading.Thread(target=busy, args=(t,)) for t in trackers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    edits = fake.calls("PATCH", r"/issues/comments/\d+$")
    assert not [r for r in fake.writes() if r.status in (403, 429)]  # never refused
    assert len(edits) > 2 * len(trackers)  # progress went through, between the phase changes
    assert all(c["body"].startswith("done") for c in fake.comments(OWNER, NAME, number))  # every result arrived


def test_workers_on_one_job_store_share_the_installations_write_budget(world, store_factory):
    """Two workers (two stores on one database or file, as two processes or hosts have), each writing as fast as
    it may: together they stay within the one limit GitHub counts for the installation, and GitHub's request
    to wait, heard by one, holds the other's writes too."""
    fake = world[0]
    fake.limit_writes(3, 0.5)
    number = fake.add_issue(OWNER, NAME, "Busy", "", user="alice")
    forges = [GitHubForge(TokenCredentials(fake.token, fake.api_url), retry=GitHubRetry(sleep=lambda s: None),
                          pacer=WritePacer(((3, 0.5),), ledger=store_factory())) for _ in range(2)]

    def write(n: int) -> None:
        for i in range(4):
            forges[n].post_comment(REPO, number, f"worker {n}, note {i}", f"<!-- {n}.{i} -->")
    threads = [threading.Thread(target=write, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    writes = fake.writes()
    assert len(writes) == 8 and not [r for r in writes if r.status in (403, 429)]  # never refused
    assert len(fake.comments(OWNER, NAME, number)) == 8
    forges[0].pacer.asked(OWNER, 30.0, "secondary rate limit")
    assert not forges[1].pacer.may_write(OWNER)  # the other worker heard it through the store
