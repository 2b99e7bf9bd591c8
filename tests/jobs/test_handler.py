"""The worker's handler of a claimed job: its log line says how the job ended and, when it did not run or
failed, why, through the fake GitHub."""

from __future__ import annotations

import logging
import time

from bot.github.work import Issue, job_key, job_payload
from bot.jobs.handler import job_handler
from bot.jobs.sqlite import JobRecord
from tests.support.github_job import NAME, OWNER, REPO, world  # noqa: F401 (fixture)


def claimed(work: Issue) -> JobRecord:
    return JobRecord(id=7, delivery_id="d-7", key=job_key(work), payload=job_payload(work, "issues", "d-7"),
                     state="running", attempts=1, created_at=time.time())


def ended(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "decode.worker" and r.getMessage().startswith("job 7: ")
            and r.getMessage().split(": ")[1].split()[0].rstrip(":") in ("skipped", "failed")]


def test_a_skipped_job_logs_why(world, caplog):
    fake, _, settings, forge, _ = world
    number = fake.add_issue(OWNER, NAME, "x", "y", user="rita")
    caplog.set_level(logging.INFO)
    job_handler(settings, forge)(claimed(Issue(repo=REPO, number=number, sender_login="rita")))
    [line] = ended(caplog)
    assert line.levelno == logging.INFO and line.getMessage().startswith("job 7: skipped: ")
    assert "rita" in line.getMessage(), line.getMessage()


def test_a_failed_job_logs_why_once(world, caplog):
    fake, _, settings, forge, _ = world
    caplog.set_level(logging.INFO)
    job_handler(settings, forge)(claimed(Issue(repo=f"{OWNER}/nosuch", number=1, sender_login="alice")))
    [line] = ended(caplog)
    assert line.levelno == logging.ERROR and line.getMessage().startswith("job 7: failed: ")
    said = line.getMessage().removeprefix("job 7: failed: ")
    assert said and sum(said in r.getMessage() for r in caplog.records) == 1  # one line, not one per layer
