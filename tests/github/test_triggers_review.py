"""`pull_request_review.submitted`: the review route over GitHub's own example payload, and the `Review` kind's
trip through the queue."""

from __future__ import annotations

import json

from bot.server.manifest import events
from bot.github.triggers import Ignore, Router, Rules
from bot.github.work import Review, asked_by, job_key, job_payload, reaction_target, work_of
from tests.fakes.webhook_examples import example

ROUTER = Router(Rules())


def review(body: str | None, state: str = "commented", sender: str = "alice", sender_type: str = "User") -> dict:
    return example("pull_request_review", "submitted", repo="octo/calendar", sender=sender, sender_type=sender_type,
                   review__body=body, review__state=state, review__id=55, pull_request__number=9)


def test_a_review_starting_with_the_command_is_one_review_with_its_instructions():
    work = ROUTER.decide("pull_request_review", review("/decode please address these\nall of them"))
    assert isinstance(work, Review)
    assert (work.repo, work.number, work.review_id, work.sender_login) == ("octo/calendar", 9, 55, "alice")
    assert work.instructions == "please address these\nall of them" and work.by_command
    assert work.title and work.kind == "review"


def test_a_review_requesting_changes_goes_to_the_job_with_its_body_as_instructions():
    work = ROUTER.decide("pull_request_review", review("  Rename the helper.  ", state="changes_requested"))
    assert isinstance(work, Review) and not work.by_command and work.instructions == "Rename the helper."
    empty = ROUTER.decide("pull_request_review", review(None, state="changes_requested"))
    assert isinstance(empty, Review) and empty.instructions == ""


def test_other_reviews_start_nothing_and_a_bot_reaches_the_job():
    for body, state in ((None, "commented"), ("LGTM", "approved"), ("please /decode this", "commented"),
                        ("/decoder x", "commented")):
        decision = ROUTER.decide("pull_request_review", review(body, state))
        assert isinstance(decision, Ignore) and "/decode" in decision.reason, (body, state)
    bot = ROUTER.decide("pull_request_review", review("/decode go", sender="ci[bot]", sender_type="Bot"))
    assert isinstance(bot, Review) and bot.sender_type == "Bot"  # the job reads allowed_bots (test_bots.py)
    assert isinstance(ROUTER.decide("pull_request_review", example("pull_request_review", "dismissed")), Ignore)


def test_a_custom_command_and_a_malformed_payload():
    custom = Router(Rules(command="/bot"))
    assert isinstance(custom.decide("pull_request_review", review("/bot fix")), Review)
    assert isinstance(custom.decide("pull_request_review", review("/decode fix")), Ignore)
    broken = review("/decode fix")
    del broken["review"]["id"]
    assert "malformed" in ROUTER.decide("pull_request_review", broken).reason


def test_a_review_survives_the_queue_and_keys_its_pull_request():
    work = Review(repo="Octo/Calendar", number=9, sender_login="alice", sender_type="User", review_id=55,
                  instructions="rename it", by_command=False, title="T", body="B")
    stored = json.loads(json.dumps(job_payload(work, "pull_request_review", "d-1")))
    assert stored["work"]["kind"] == "review" and work_of(stored) == work
    assert job_key(work) == "octo/calendar#9" and asked_by(work) == "review-55"
    assert reaction_target(work) is None  # GitHub has no reactions on reviews


def test_the_app_subscribes_to_reviews():
    assert "pull_request_review" in events()
