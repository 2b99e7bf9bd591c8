"""The `decode-bot` check run end to end: jobs on the App (installation tokens) and with the Action's token
against the fake GitHub, which makes and updates check runs with GitHub's rules and records each state."""

from __future__ import annotations

import logging

import pytest

from bot.github.auth import AppCredentials
from bot.github.check_run import start_check_run
from bot.github.forge import GitHubForge
from bot.github.job import JobContext, run_github_job
from bot.github.retry import GitHubRetry
from bot.github.triggers import Ignore, Router, Rules
from bot.model.anthropic import AnthropicModel
from tests.fakes.github_check_runs import decode_runs
from tests.support.github_job import NAME, OWNER, REPO, as_sent, delivery, edit_turns, run, world  # noqa: F401

PUBLIC = "https://decode.example"
TESTS = "python3 -m unittest -q"
FIX = [{"type": "tool_use", "name": "edit", "input": {"path": "calendar_utils.py",
                                                     "old_string": "return day.weekday() > 5",
                                                     "new_string": "return day.weekday() >= 5"}}]


def answer(text: str) -> list[dict]:
    return [{"type": "text", "text": text}]


@pytest.fixture
def app(world):
    """The world as the App sees it: installation tokens, its id (for Re-run), a public URL (transcript links)."""
    fake, _, settings, _, _ = world
    creds = AppCredentials(str(fake.app_id), fake.private_key_pem, fake.api_url)
    forge = GitHubForge(creds, retry=GitHubRetry(sleep=lambda s: None))
    return forge, settings.replace(github_token=None, github_app_id=str(fake.app_id), public_url=PUBLIC)


def run_app(world, app, event: str, payload: dict, run_id: str = "job-1"):
    fake, anthropic, *_ = world
    forge, settings = app
    work = Router(Rules.of(settings.github)).decide(event, as_sent(fake, payload))
    assert not isinstance(work, Ignore), work
    return run_github_job(JobContext(work, forge, run_id=run_id, tag=f"origin:{run_id}",
                                     model=AnthropicModel(settings.model, sleep=lambda s: None)), settings.job)


def labeled(fake, decode_yml: str) -> dict:
    fake.push_branch(OWNER, NAME, "main", {".github/decode.yml": decode_yml})
    number = fake.add_issue(OWNER, NAME, "Weekend check is wrong", "Saturdays count as workdays.", user="alice")
    return delivery("issues", "labeled", issue__number=number, label__name="agent")


def pr_comment(fake, text: str = "/decode add notes") -> dict:
    fake.push_branch(OWNER, NAME, "feature", {"feature.txt": "wip\n"})
    number = fake.add_pull(OWNER, NAME, "Feature", "A feature.", head_branch="feature", base_branch="main",
                           user="alice")
    comment = fake.add_comment(OWNER, NAME, number, text, user="alice")
    return delivery("issue_comment", "created", issue__number=number, issue__pull_request={"url": "x"},
                    comment__id=comment, comment__body=text)


def test_a_labeled_issue_on_the_app_completes_a_check_run_on_its_new_head_with_the_verification(world, app):
    fake, anthropic, *_ = world
    anthropic.script([answer("Looks fine to me."), FIX, answer("Fixed is_weekend: Saturday is 5.")])
    conclusion = run_app(world, app, "issues", labeled(fake, f"verify:\n  - {TESTS}\n"))
    assert conclusion.state == "success", conclusion.message
    [pr] = fake.pulls(OWNER, NAME)
    [check] = decode_runs(fake, OWNER, NAME)
    assert check["head_sha"] == fake.branch_sha(OWNER, NAME, pr["head"]["ref"]) and check["app"] == "decode-bot"
    assert check["history"] == [("completed", "success", "Done")]
    output = check["output"]
    assert pr["html_url"] in output["summary"] and "Fixed is_weekend: Saturday is 5." in output["summary"]
    assert "**Verification** (✅ passed" in output["text"] and f"- ✅ `{TESTS}` (" in output["text"]
    assert "| turns |" in output["text"]
    assert check["details_url"].startswith(f"{PUBLIC}/runs/job-1?exp=")


def test_a_run_on_a_pull_request_goes_queued_in_progress_completed_and_marks_the_new_head(world, app):
    fake, anthropic, *_ = world
    payload = pr_comment(fake)
    old_head = fake.branch_sha(OWNER, NAME, "feature")
    anthropic.script(edit_turns("noted"))
    conclusion = run_app(world, app, "issue_comment", payload)
    assert conclusion.state == "success", conclusion.message
    first, second = decode_runs(fake, OWNER, NAME)
    assert first["head_sha"] == old_head and second["head_sha"] == fake.branch_sha(OWNER, NAME, "feature")
    states = first["history"]
    assert states[0] == ("queued", None, "Queued") and states[-1] == ("completed", "success", "Done")
    titles = [title for status, _, title in states if status == "in_progress"]
    assert titles[0] == "Preparing the workspace" and "Agent at work" in titles and titles[-1] == "Publishing"
    assert second["history"] == [("completed", "success", "Done")]


def test_a_job_takes_over_the_check_run_made_while_it_waited_in_the_queue(world, app):
    fake, anthropic, *_ = world
    forge, settings = app
    payload = pr_comment(fake)
    work = Router(Rules.of(settings.github)).decide("issue_comment", as_sent(fake, payload))
    start_check_run(forge, work, "origin:job-1", None).wait("Third in the queue: two jobs of this installation run.")
    anthropic.script(edit_turns("noted"))
    run_app(world, app, "issue_comment", payload)
    first, second = decode_runs(fake, OWNER, NAME)
    assert first["history"][:2] == [("queued", None, "Queued"), ("queued", None, "Queued")]
    assert first["history"][-1] == ("completed", "success", "Done") and second["conclusion"] == "success"


def test_a_verify_that_never_passes_ends_the_check_run_in_failure_with_the_commands_tail(world, app):
    fake, anthropic, *_ = world
    anthropic.script([*edit_turns("noted")[:1], answer("Done."), answer("Still done.")])
    broken = "echo the-broken-part; exit 3"
    conclusion = run_app(world, app, "issues", labeled(fake, f"verify: '{broken}'\nverify_rounds: 1\n"))
    assert conclusion.ran.verification.verified == "failed", conclusion.message
    [check] = decode_runs(fake, OWNER, NAME)
    assert check["conclusion"] == "failure" and check["output"]["title"] == "Verification failed"
    text = check["output"]["text"]
    assert "**Verification** (❌ failed" in text and ": exit code 3" in text and "the-broken-part" in text


def test_re_run_on_the_check_run_runs_its_job_again(world, app):
    fake, anthropic, *_ = world
    anthropic.script(edit_turns("first"))
    payload = pr_comment(fake)
    run_app(world, app, "issue_comment", payload)
    done = decode_runs(fake, OWNER, NAME)[-1]
    rerun = delivery("check_run", "rerequested", check_run__name="decode-bot", check_run__id=done["id"],
                     check_run__external_id=done["external_id"], check_run__head_sha=done["head_sha"],
                     check_run__app={"id": fake.app_id, "slug": "decode-bot"})
    anthropic.script(edit_turns("again"))
    conclusion = run_app(world, app, "check_run", rerun, run_id="job-2")
    assert conclusion.state == "success", conclusion.message
    assert fake.file(OWNER, NAME, "feature", "NOTES.md") == "first\nagain\n"
    latest = decode_runs(fake, OWNER, NAME)[-1]
    assert latest["head_sha"] == fake.branch_sha(OWNER, NAME, "feature") and latest["conclusion"] == "success"
    assert latest["details_url"].startswith(f"{PUBLIC}/runs/job-2?exp=")


def test_re_run_is_taken_only_on_this_apps_decode_bot_check_runs(world, app):
    fake, *_ = world
    _, settings = app
    router = Router(Rules.of(settings.github))
    base = dict(check_run__name="decode-bot", check_run__external_id='{"tag":"o:1","work":{"kind":"issue",'
                f'"repo":"{REPO}","number":1,"instructions":""}}}}')
    other_app = delivery("check_run", "rerequested", check_run__app={"id": 1}, **base)
    assert "not this one" in router.decide("check_run", other_app).reason
    ours = delivery("check_run", "rerequested", check_run__app={"id": fake.app_id}, **base)
    assert router.decide("check_run", ours).number == 1
    renamed = delivery("check_run", "rerequested", check_run__app={"id": fake.app_id},
                       **{**base, "check_run__name": "tests"})
    assert isinstance(router.decide("check_run", renamed), Ignore)


def test_with_the_actions_token_the_check_run_is_made_and_links_the_actions_run(world):
    fake, anthropic, *_ = world
    anthropic.script(edit_turns("noted"))
    conclusion = run(world, "issue_comment", pr_comment(fake))
    assert conclusion.state == "success", conclusion.message
    first, second = decode_runs(fake, OWNER, NAME)
    assert first["app"] == "github-actions" and first["history"][0][0] == "queued"
    assert first["conclusion"] == second["conclusion"] == "success"
    assert first["details_url"] == "https://ci.example/run/1"  # the Actions run, as the tracking comment links it


def test_a_token_without_checks_permission_logs_one_line_and_the_run_still_opens_its_pr(world, caplog):
    fake, anthropic, *_ = world
    fake.tokens[fake.token].permissions = {"contents": "write", "issues": "write", "pull_requests": "write"}
    anthropic.script(edit_turns("noted"))
    with caplog.at_level(logging.WARNING, logger="bot.github.check_run"):
        conclusion = run(world, "issues", labeled(fake, "{}\n"))
    assert conclusion.state == "success", conclusion.message
    assert len(fake.pulls(OWNER, NAME)) == 1 and decode_runs(fake, OWNER, NAME) == []
    [line] = [r.getMessage() for r in caplog.records if r.name == "bot.github.check_run"]
    assert "may not create check runs (403 Resource not accessible by integration)" in line
    assert "checks: write" in line
