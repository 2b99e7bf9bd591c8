"""POST /webhook through the Flask app with a real SQLite store, fed GitHub's own example payloads."""

import time
from dataclasses import replace

import pytest

from bot.config import Settings
from bot.core.errors import ConfigError
from bot.server import create_app
from bot.github.work import Comment, check_ref, work_of
from bot.server.context import app_context
from tests.fakes.webhook_examples import all_examples, example
from tests.server.conftest import delivery
from tests.support.webhooks import labeled


def post(client, event, payload, **kw):
    body, headers = delivery(event, payload, **kw)
    return client.post("/webhook", data=body, headers=headers)


def test_an_app_without_a_webhook_secret_refuses_to_start(tmp_path, store):
    """Partly configured is an error; with no App credential at all the app is in setup mode
    (tests/server/test_setup.py), where /webhook answers 503."""
    with pytest.raises(ConfigError, match="GITHUB_WEBHOOK_SECRET is not set"):
        create_app(Settings(data_dir=tmp_path, github_app_id="424242"), store)


def test_every_example_of_every_event_gets_a_non_5xx_answer_and_none_queues_agent_work(client, store):
    answers = {}
    for host, event, payload in all_examples():
        res = post(client, event, payload)
        answers[(host, event, payload.get("action"))] = res.status_code
        assert res.status_code < 500, (host, event, res.get_json())
        if res.status_code == 202:  # only installations: the trigger label goes into their repositories
            assert (event, payload["action"]) in {("installation", "created"), ("installation_repositories", "added")}
            assert store.job(res.get_json()["job"]).payload["work"]["kind"] == "labels"
    assert len(answers) > 300
    assert {s for s in answers.values()} == {200, 202}  # no example carries the trigger label or the command


def test_a_labeled_issue_is_stored_then_answered_202(client, store):
    res = post(client, "issues", labeled())
    assert res.status_code == 202 and res.get_json()["outcome"] == "queued"
    job = store.job(res.get_json()["job"])
    assert job.state == "queued" and job.payload["work"]["kind"] == "issue"
    assert job.key.endswith(f"#{job.payload['work']['number']}")


def test_re_run_on_a_decode_bot_check_run_queues_its_work_again_asked_by_the_clicker(client, store):
    work = Comment("octo/calendar", 7, "alice", "User", comment_id=99, instructions="add notes", is_pull_request=True)
    payload = example("check_run", "rerequested", repo="octo/calendar", sender="bob",
                      check_run__name="decode-bot", check_run__external_id=check_ref(work, "origin:job-3"))
    res = post(client, "check_run", payload)
    assert res.status_code == 202, res.get_json()
    stored = work_of(store.job(res.get_json()["job"]).payload)
    assert stored == replace(work, sender_login="bob")  # bob's permission is checked when the job runs


def test_a_job_counts_against_the_installation_that_delivered_it_else_its_owner(client, store):
    """The installation is what the caps and the round-robin order of claims count (docs/scale.md)."""
    from_app = post(client, "issues", {**labeled(), "installation": {"id": 4242, "node_id": "MDIz"}})
    without = labeled()
    without["issue"]["number"] += 1
    from_token = post(client, "issues", without)
    assert store.job(from_app.get_json()["job"]).installation == "4242"
    assert store.job(from_token.get_json()["job"]).installation == without["repository"]["owner"]["login"].lower()


def test_a_redelivery_does_not_make_a_second_job(client, store):
    first = post(client, "issues", labeled(), delivery_id="d-1")
    again = post(client, "issues", labeled(), delivery_id="d-1")
    assert first.status_code == 202 and again.status_code == 200
    assert again.get_json()["outcome"] == "duplicate" and store.counts()["queued"] == 1


def test_a_replayed_body_under_a_new_delivery_id_does_not_make_a_second_job(client, store):
    body, headers = delivery("issues", labeled(), delivery_id="d-1")
    first = client.post("/webhook", data=body, headers=headers)
    replay = client.post("/webhook", data=body, headers={**headers, "X-GitHub-Delivery": "d-2"})
    assert first.status_code == 202 and replay.status_code == 200
    assert replay.get_json()["outcome"] == "duplicate" and store.counts()["queued"] == 1
    relabeled = example("issues", "labeled", sender_type="User", label__name="agent",
                        issue__updated_at="2030-01-01T00:00:00Z")  # removed and added again: a new body
    assert post(client, "issues", relabeled, delivery_id="d-3").status_code == 202


@pytest.mark.parametrize("event,action,text", [
    ("issues", "labeled", None), ("issue_comment", "created", "comment"), ("pull_request_review", "submitted", "review"),
])
def test_a_signed_body_older_than_the_digest_window_is_refused_as_a_replay(client, store, event, action, text):
    """Its digest may have been pruned after BODY_RETENTION_S (90 days): its own times give it away."""
    def dated(days_ago: int) -> dict:
        at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - days_ago * 86400))
        payload = example(event, action, sender_type="User", at=at)
        if text is None:
            payload["label"]["name"] = "agent"
        else:  # the command in a comment or a review, by someone who may run it
            payload[text].update(body="/decode do it", author_association="OWNER")
        return payload
    old = post(client, event, dated(91))
    assert old.status_code == 400 and old.get_json()["outcome"] == "stale", old.get_json()
    assert "refused as a replay" in old.get_json()["message"] and store.counts().get("queued", 0) == 0
    assert post(client, event, dated(80)).status_code == 202  # still inside the window: the digest catches it


def test_json_nested_too_deeply_is_400_not_500(client, store):
    for bomb in (b"[" * 100_000, b'{"a":' * 100_000):
        body, headers = delivery("issues", bomb)
        res = client.post("/webhook", data=body, headers=headers)
        assert res.status_code == 400 and "too deeply" in res.get_json()["message"]
    assert store.counts()["queued"] == 0


def test_ping_is_answered(client):
    res = post(client, "ping", example("ping"))
    assert res.status_code == 200 and res.get_json()["outcome"] == "pong"


def test_signatures_are_checked_before_parsing(client, store):
    body, headers = delivery("issues", labeled(), secret="the-wrong-secret")
    res = client.post("/webhook", data=body, headers=headers)
    assert res.status_code == 401 and "GITHUB_WEBHOOK_SECRET" in res.get_json()["message"]
    del headers["X-Hub-Signature-256"]
    assert client.post("/webhook", data=body, headers=headers).status_code == 401
    body, headers = delivery("issues", b"{not json")  # correctly signed garbage: 400, not 401
    assert client.post("/webhook", data=body, headers=headers).status_code == 400
    body, headers = delivery("issues", b"{not json", secret="nope")  # garbage unsigned: 401 first
    assert client.post("/webhook", data=body, headers=headers).status_code == 401
    assert store.counts()["queued"] == 0


def test_a_body_over_25_mb_is_413(client):
    body, headers = delivery("issues", b"x" * (25 * 1024 * 1024 + 1))
    assert client.post("/webhook", data=body, headers=headers).status_code == 413


def test_missing_github_headers_are_400(client):
    body, headers = delivery("issues", labeled())
    del headers["X-GitHub-Event"]
    assert client.post("/webhook", data=body, headers=headers).status_code == 400


def test_healthz_and_metrics(client):
    assert client.get("/healthz").status_code == 200
    post(client, "issues", labeled())
    post(client, "issues", labeled("bug"))
    app_context(client.application).bind = "127.0.0.1"  # decode serve's default --host
    text = client.get("/metrics").get_data(as_text=True)
    assert 'decode_deliveries_total{outcome="queued"} 1.0' in text
    assert 'decode_deliveries_total{outcome="ignored"} 1.0' in text
    assert 'decode_jobs{state="queued"} 1.0' in text


def test_a_stored_job_wakes_this_process_s_runner(app, client, store):
    """A job queued by this server starts at once, not at its runner's next poll (30 s here)."""
    import threading
    import time

    from bot.jobs.lease import LeaseRunner, Outcome
    from bot.server.context import app_context
    from bot.jobs.worker import ThreadExecutor

    started = threading.Event()
    runner = LeaseRunner(store, ThreadExecutor(lambda job: started.set() or Outcome(result={})), limit=1, poll_s=30)
    app_context(app).runner = runner
    runner.start()
    try:
        time.sleep(0.2)  # the first sweep found nothing
        assert post(client, "issues", labeled()).status_code == 202
        assert started.wait(5), "the job waited for the runner's poll"
    finally:
        runner.stop(1)
