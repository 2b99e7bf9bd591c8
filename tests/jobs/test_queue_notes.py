"""Queued jobs' comments on the fake GitHub, over both stores: each waiting job says its place in line and
why it waits, the comment changes only when that does, and the job's run finds it again."""

from __future__ import annotations

import threading
import time

import pytest

from bot.github.auth import AppCredentials
from bot.github.conclusion import marker
from bot.github.forge import GitHubForge
from bot.github.tracking import Tracker, post_marked
from bot.github.work import Comment, Issue, job_key, job_payload
from bot.jobs.handler import tag_of
from bot.jobs.queue import ordinal
from bot.jobs.queue_notes import MAX_WRITES, QueueNotes
from bot.jobs.store import JobStore
from tests.support.stores import StoreFactory

REPOS = {"octo/calendar": 1, "acme/web": 2}  # repository -> the installation it is in


@pytest.fixture
def forge(fake_github) -> GitHubForge:
    for repo in REPOS:
        owner, name = repo.split("/")
        fake_github.add_repo(owner, name, {"README.md": "hi\n"})
        fake_github.set_permission(owner, name, "alice", "write")
        for n in range(5):
            fake_github.add_issue(owner, name, f"bug {n}", user="alice")
    credentials = AppCredentials(str(fake_github.app_id), fake_github.private_key_pem, fake_github.api_url)
    return GitHubForge(credentials)


def enqueue(store: JobStore, work: Issue | Comment) -> int:
    payload = job_payload(work, "issues", f"d-{time.monotonic_ns()}", REPOS[work.repo])
    return store.record_delivery(payload["delivery"], "issues", "queued", (job_key(work), payload))


def comment_of(fake_github, repo: str, number: int) -> str:
    owner, name = repo.split("/")
    bodies = [c["body"] for c in fake_github.comments(owner, name, number)]
    assert len(bodies) == 1, bodies
    return bodies[0]


def test_ten_jobs_of_two_installations_alternate_and_each_waiting_comment_says_its_place(
        store_factory: StoreFactory, fake_github, forge: GitHubForge) -> None:
    store = store_factory(lease_s=60, per_installation=1)
    for repo in REPOS:  # five issues of installation 1, then five of installation 2
        for number in range(1, 6):
            enqueue(store, Issue(repo, number, "alice"))
    notes = QueueNotes(store, forge)
    assert notes.tell() == 10
    assert comment_of(fake_github, "octo/calendar", 1).startswith(
        "⏳ decode-bot queued this: 1st in line; waiting for a free worker.")
    assert "2nd in line" in comment_of(fake_github, "acme/web", 1)
    claimed: list[str] = []
    while store.counts()["queued"]:
        jobs = [job for job in (store.claim("w1"), store.claim("w2")) if job is not None]
        claimed += [job.key for job in jobs]
        edits = len(fake_github.calls("PATCH", r"/issues/comments/"))
        notes.tell()
        by_turn = sorted(store.snapshot().queued, key=lambda j: (int(j.key.split("#")[1]), j.installation))
        waiting = [(job.key, n) for n, job in enumerate(by_turn, start=1)]
        for key, position in waiting:
            repo, number = key.split("#")
            assert (f"queued this: {ordinal(position)} in line; waiting: its installation already has 1 run going "
                    "(the cap is 1).") in comment_of(fake_github, repo, int(number))
        assert notes.tell() == 0  # nothing moved: nothing is written
        assert len(fake_github.calls("PATCH", r"/issues/comments/")) - edits == len(waiting)
        for job, worker in zip(jobs, ("w1", "w2")):
            repo, number = job.key.split("#")
            assert forge.find_comment(repo, int(number), marker("run", tag_of(job))) is not None  # its run's
            assert store.finish(job.id, worker, "done")
    assert claimed == [f"{repo}#{n}" for n in range(1, 6) for repo in REPOS]


def test_a_command_from_someone_who_may_not_start_work_is_not_told_it_is_queued(
        store_factory: StoreFactory, fake_github, forge: GitHubForge) -> None:
    store = store_factory(lease_s=60)
    fake_github.set_permission("octo", "calendar", "mallory", "read")
    enqueue(store, Comment("octo/calendar", 1, "mallory", "User", comment_id=77, instructions="do it"))
    enqueue(store, Comment("octo/calendar", 2, "alice", "User", comment_id=78, instructions="do it"))
    notes = QueueNotes(store, forge)
    assert notes.tell() == 1
    assert fake_github.comments("octo", "calendar", 1) == []
    assert "2nd in line" in comment_of(fake_github, "octo/calendar", 2)
    assert notes.tell() == 0


def test_a_long_queue_is_told_twenty_comments_a_pass_front_first_deep_places_by_tens(
        store_factory: StoreFactory, fake_github, forge: GitHubForge) -> None:
    store = store_factory(lease_s=60)
    for _ in range(20):
        fake_github.add_issue("octo", "calendar", "another bug", user="alice")
    for number in range(1, 26):
        enqueue(store, Issue("octo/calendar", number, "alice"))
    notes = QueueNotes(store, forge)
    assert notes.tell() == MAX_WRITES == 20
    assert fake_github.comments("octo", "calendar", 21) == []  # the next pass
    assert notes.tell() == 5
    assert "queued this: in line behind 20+ jobs; waiting for a free worker." in comment_of(
        fake_github, "octo/calendar", 25)
    store.finish(store.claim("w").id, "w", "done")
    assert notes.tell() == 11  # the first ten places moved, and the 21st into the tens below; the rest stay


def test_the_notes_thread_tells_the_queue_until_stopped(store_factory: StoreFactory, fake_github,
                                                        forge: GitHubForge) -> None:
    store = store_factory(lease_s=60)
    enqueue(store, Issue("octo/calendar", 1, "alice"))
    notes = QueueNotes(store, forge, every_s=0.05)
    notes.start()
    deadline = time.monotonic() + 10
    while not fake_github.comments("octo", "calendar", 1) and time.monotonic() < deadline:
        time.sleep(0.05)
    notes.stop()
    assert "1st in line" in comment_of(fake_github, "octo/calendar", 1)


def test_a_waiting_job_on_a_pull_request_has_a_queued_check_run_saying_its_place(
        store_factory: StoreFactory, fake_github, forge: GitHubForge) -> None:
    """Issue 25: a queued job's check run says where it stands too; its run takes the same check run over."""
    from tests.fakes.github_checks import checks_of

    store = store_factory(lease_s=60, per_repo=1)
    fake_github.push_branch("octo", "calendar", "feature", {"feature.txt": "wip\n"})
    number = fake_github.add_pull("octo", "calendar", "Feature", head_branch="feature", user="alice")
    enqueue(store, Issue("octo/calendar", 1, "alice"))
    enqueue(store, Comment("octo/calendar", number, "alice", "User", comment_id=5, instructions="add notes",
                           is_pull_request=True))
    notes = QueueNotes(store, forge)
    assert store.claim("w1") is not None and notes.tell() == 1
    [run] = checks_of(fake_github).runs.values()
    assert (run["name"], run["status"], run["output"]["title"]) == ("decode-bot", "queued", "Queued")
    assert run["head_sha"] == fake_github.branch_sha("octo", "calendar", "feature")
    assert run["output"]["summary"] == ("1st in line; waiting: octo/calendar already has 1 run going "
                                        "(the cap is 1)")


def test_a_queue_note_posted_as_its_job_starts_becomes_the_runs_one_comment(
        store_factory: StoreFactory, fake_github, forge: GitHubForge) -> None:
    """The race seen under load: the run found no comment, the queue note was posted, then the run posted its
    own. One comment stays, the older, saying how the run stands."""
    store = store_factory(lease_s=60)
    enqueue(store, Issue("octo/calendar", 1, "alice"))
    tracker = Tracker(forge, "octo/calendar", None, footer="the run's footer")  # the run's lookup: nothing yet
    assert QueueNotes(store, forge).tell() == 1  # the job is still queued in the store
    job = store.claim("w1")
    assert job is not None
    tag = marker("run", tag_of(job))
    [note] = forge.find_comments("octo/calendar", 1, tag)
    tracker.footer = f"the run's footer\n\n{tag}"
    tracker.start(1, tag)
    assert tracker.comment_id == note
    body = comment_of(fake_github, "octo/calendar", 1)  # one comment: the run's post was taken back
    assert "**Preparing the workspace**" in body and "queued" not in body, body


def test_a_queue_note_posted_after_the_runs_comment_is_taken_back_and_leaves_it_as_it_is(
        fake_github, forge: GitHubForge) -> None:
    tag = marker("run", "job-9")
    runs = forge.post_comment("octo/calendar", 2, f"👀 the run's comment\n\n{tag}", tag)
    kept = post_marked(forge, "octo/calendar", 2, f"⏳ queued\n\n{tag}", tag, over_older=False)
    assert kept == runs
    assert comment_of(fake_github, "octo/calendar", 2) == f"👀 the run's comment\n\n{tag}"


def test_a_runs_comment_gone_when_it_starts_is_posted_anew(fake_github, forge: GitHubForge) -> None:
    """The run found a comment (a queue note posted twice by two processes, say) that its writer then took back:
    the run posts its own instead of failing."""
    tag = marker("run", "job-7")
    found = forge.post_comment("octo/calendar", 3, f"⏳ queued\n\n{tag}", tag)
    forge.delete_comment("octo/calendar", found)
    tracker = Tracker(forge, "octo/calendar", found, footer=f"the run's footer\n\n{tag}")
    tracker.start(3, tag)
    assert tracker.comment_id != found and forge.find_comments("octo/calendar", 3, tag) == [tracker.comment_id]
    assert "**Preparing the workspace**" in comment_of(fake_github, "octo/calendar", 3)


def test_a_queue_note_edit_that_failed_never_lands_over_the_run_that_started_meanwhile(
        store_factory: StoreFactory, fake_github, forge: GitHubForge) -> None:
    """GitHub answered the edit of a waiting job's comment 502, and the job was claimed before a retry could go:
    the issue ends showing the run's result, not that the job is queued."""
    store = store_factory(lease_s=60)
    for number in (1, 2):
        enqueue(store, Issue("octo/calendar", number, "alice"))
    notes = QueueNotes(store, forge)
    assert notes.tell() == 2
    first = store.claim("w1")
    assert first is not None
    second = store.snapshot().queued[0]
    tag = marker("run", tag_of(second))
    note = forge.find_comment("octo/calendar", 2, tag)
    fake_github.inject("PATCH", rf"/issues/comments/{note}$", 502)
    telling = threading.Thread(target=notes.tell)
    telling.start()  # the second job moved up to 1st: its comment is edited, and GitHub fails it
    deadline = time.monotonic() + 10
    while not (failed := [r for r in fake_github.calls("PATCH") if r.status == 502]) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert failed, "GitHub failed the queue note's edit"
    assert store.claim("w2") is not None
    tracker = Tracker(forge, "octo/calendar", forge.find_comment("octo/calendar", 2, tag), footer=tag)
    tracker.start(2, tag)
    tracker.finish("✅ Nothing to change.")
    telling.join(30)
    assert comment_of(fake_github, "octo/calendar", 2) == f"✅ Nothing to change.\n\n{tag}"


def test_a_run_starting_while_two_notes_race_writes_its_result_into_the_one_kept(
        fake_github, forge: GitHubForge) -> None:
    """Two processes posted a job's queue note at once; the newer writer is about to take its post back when
    the run looks for its comment. The run takes the older, the one kept, and its result shows on the issue."""
    tag = marker("run", "job-5")
    kept = forge.post_comment("octo/calendar", 4, f"⏳ queued: 3rd in line\n\n{tag}", tag)
    taken_back = forge.post_comment("octo/calendar", 4, f"⏳ queued: 2nd in line\n\n{tag}", tag)
    tracker = Tracker(forge, "octo/calendar", forge.find_comment("octo/calendar", 4, tag), footer=tag)
    tracker.start(4, tag)
    forge.delete_comment("octo/calendar", taken_back)  # as post_marked does: an older one with the mark exists
    tracker.finish("✅ Nothing to change.")
    assert tracker.comment_id == kept
    assert comment_of(fake_github, "octo/calendar", 4) == f"✅ Nothing to change.\n\n{tag}"
