"""Installing the App puts the trigger label in each repository, from GitHub's own installation payloads."""

from __future__ import annotations

import time

from bot.jobs.handler import job_handler
from bot.jobs.sqlite import JobRecord
from bot.github.triggers import Router, Rules
from bot.github.work import Labels, job_key, job_payload, work_of
from tests.fakes.webhook_examples import example
from tests.support.github_job import world  # noqa: F401 (fixture)


def queued(work: Labels) -> JobRecord:
    payload = job_payload(work, "installation", "d-1")
    return JobRecord(id=1, delivery_id="d-1", key=job_key(work), payload=payload, state="running", attempts=1,
                     created_at=time.time(), store_id="0123456789abcdef")


def test_a_new_installation_gets_the_label_where_it_is_missing(world):
    fake, _, settings, forge, _ = world
    for name in ("notes", "site"):  # octo/calendar is the world's
        fake.add_repo("octo", name, {"README.md": "hi\n"})
    fake.repo("octo", "site").labels["agent"] = {"name": "Agent", "color": "000000", "description": "ours"}
    payload = example("installation", "created", sender="alice",
                      repositories=[{"full_name": f"octo/{n}", "name": n} for n in ("calendar", "notes", "site")])
    work = Router(Rules.of(settings.github)).decide("installation", payload)
    assert work == Labels(repos=("octo/calendar", "octo/notes", "octo/site"), sender_login="alice")
    assert work_of(queued(work).payload) == work  # through the queue and back
    outcome = job_handler(settings.job, forge)(queued(work))
    assert outcome.error is None and outcome.result["state"] == "success"
    for name in ("calendar", "notes"):
        assert fake.repo("octo", name).labels["agent"]["name"] == "agent"
    assert fake.repo("octo", "site").labels["agent"] == {"name": "Agent", "color": "000000", "description": "ours"}
    again = job_handler(settings.job, forge)(queued(work))  # a redelivery changes nothing
    assert again.result["state"] == "no_changes"


def test_repositories_added_to_an_installation_get_it_and_one_refusal_does_not_stop_the_others(world):
    fake, _, settings, forge, _ = world
    payload = example("installation_repositories", "added", sender="alice",
                      repositories_added=[{"full_name": "octo/gone"}, {"full_name": "octo/calendar"}])
    work = Router(Rules.of(settings.github)).decide("installation_repositories", payload)
    outcome = job_handler(settings.job, forge)(queued(work))
    assert "agent" in fake.repo("octo", "calendar").labels
    assert outcome.result["state"] == "failed" and "octo/gone (404)" in outcome.error


def test_an_installation_of_no_repository_and_removals_start_nothing(world):
    _, _, settings, _, _ = world
    router = Router(Rules.of(settings.github))
    assert router.decide("installation", example("installation", "created", repositories=[])).reason == \
        "the installation names no repositories"
    assert "not handled" in router.decide("installation_repositories",
                                          example("installation_repositories", "removed")).reason
