"""What a runner does with a claimed job, on GitHub: its log line says how the job ended and, when it did not
run or failed, why; the report of a job given up on lands in that job's own tracking comment, never in the
comment of another store's job that has the same number."""

from __future__ import annotations

import logging
import time

from bot.core.names import new_store_id, run_id, run_tag
from bot.github.conclusion import marker
from bot.github.work import Issue, job_key, job_payload
from bot.jobs.handler import exhausted_reporter, job_handler, tag_of
from bot.jobs.store import JobRecord
from tests.support.forge import BOT, Comment, MemoryForge
from tests.support.github_job import NAME, OWNER, REPO, world  # noqa: F401 (fixture)


def claimed(work: Issue) -> JobRecord:
    return JobRecord(id=7, delivery_id="d-7", key=job_key(work), payload=job_payload(work, "issues", "d-7"),
                     state="running", attempts=1, created_at=time.time(),
                     store_id=new_store_id())


def ended(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "decode.worker" and r.getMessage().startswith("job 7: ")
            and r.getMessage().split(": ")[1].split()[0].rstrip(":") in ("skipped", "failed")]


def test_a_skipped_job_logs_why(world, caplog):
    fake, _, settings, forge, _ = world
    number = fake.add_issue(OWNER, NAME, "x", "y", user="rita")
    caplog.set_level(logging.INFO)
    job_handler(settings.job, forge)(claimed(Issue(repo=REPO, number=number, sender_login="rita")))
    [line] = ended(caplog)
    assert line.levelno == logging.INFO and line.getMessage().startswith("job 7: skipped: ")
    assert "rita" in line.getMessage(), line.getMessage()


def test_a_failed_job_logs_why_once(world, caplog):
    fake, _, settings, forge, _ = world
    caplog.set_level(logging.INFO)
    job_handler(settings.job, forge)(claimed(Issue(repo=f"{OWNER}/nosuch", number=1, sender_login="alice")))
    [line] = ended(caplog)
    assert line.levelno == logging.ERROR and line.getMessage().startswith("job 7: failed: ")
    said = line.getMessage().removeprefix("job 7: failed: ")
    assert said and sum(said in r.getMessage() for r in caplog.records) == 1  # one line, not one per layer


def given_up(store_id: str) -> JobRecord:
    work = Issue(repo="octo/calendar", number=7, sender_login="alice", title="Weekend check", body="")
    return JobRecord(id=1, delivery_id="d-1", key="octo/calendar#7", payload=job_payload(work, "issues", "d-1"),
                     state="failed", attempts=3, created_at=time.time(), error="gave up", store_id=store_id)


def test_a_jobs_tag_is_its_stores_id_with_its_run_id():
    store = new_store_id()
    assert tag_of(given_up(store)) == run_tag(store, run_id(1)) == f"{store}:job-1"


def test_a_job_given_up_on_edits_its_own_comment_and_not_another_stores_job_1():
    old, new = given_up(new_store_id()), given_up(new_store_id())
    forge = MemoryForge()
    forge.comments = [Comment(100, 7, f"✅ Opened #3.\n\n{marker('run', tag_of(old))}", author=BOT),
                      Comment(101, 7, f"👀 decode-bot is working on this.\n\n{marker('run', tag_of(new))}", author=BOT)]
    exhausted_reporter(forge)(new)
    assert forge.comments[0].body.startswith("✅ Opened #3.")
    assert "gave up on this after 3 attempts" in forge.comments[1].body and len(forge.comments) == 2


def test_a_job_given_up_on_before_it_posted_posts_its_report():
    job = given_up(new_store_id())
    forge = MemoryForge()
    forge.comments = [Comment(100, 7, f"copied {marker('run', tag_of(job))}", author="mallory")]
    exhausted_reporter(forge)(job)
    [_, report] = forge.comments
    assert report.author == BOT and marker("run", tag_of(job)) in report.body and "gave up" in report.body
