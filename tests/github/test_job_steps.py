"""The GitHub job's first steps (authorize, acknowledge, preflight) against an in-process `Forge`:
no HTTP, no git, no sandbox. Each case stops before the run, where the job's own decisions are."""

from __future__ import annotations

from bot.config import Settings
from bot.github.conclusion import marker
from bot.github.info import IssueInfo
from bot.github.job import JobContext, run_github_job
from bot.github.work import Issue
from tests.support.forge import BOT, Comment, MemoryForge

SETTINGS = Settings(github_token="ghp_" + "m" * 36, github_webhook_secret="s")


ISSUE = IssueInfo(7, "Weekend check", "Saturdays count.", "alice", False, "https://web.example/i/7")


def labeled(sender: str = "alice", sender_type: str = "User") -> Issue:
    return Issue(repo="octo/calendar", number=7, sender_login=sender, sender_type=sender_type,
                 title="Weekend check", body="Saturdays count.")


def test_a_bot_is_skipped_without_a_word():
    forge = MemoryForge(permissions={"renovate[bot]": "write"})
    conclusion = run_github_job(JobContext(labeled("renovate[bot]", "Bot"), forge, run_id="r1",
                                           tag="origin:r1"), SETTINGS.job)
    assert (conclusion.state, conclusion.result.exit_code) == ("skipped", 0)
    assert forge.comments == [] and forge.reactions == []


def test_a_reader_gets_one_polite_reply_however_often_the_event_comes():
    forge = MemoryForge(permissions={"rita": "read"})
    for _ in range(2):  # a redelivery, or a retried job
        conclusion = run_github_job(JobContext(labeled("rita"), forge, run_id="r1", tag="origin:r1"), SETTINGS.job)
        assert conclusion.state == "skipped" and "read permission" in conclusion.message
    [reply] = forge.comments
    assert "@rita" in reply.body and "`read`" in reply.body and forge.reactions == []


def test_a_token_refused_while_checking_permission_is_a_setting_to_fix():
    forge = MemoryForge().refuse("permission", 401)
    conclusion = run_github_job(JobContext(labeled(), forge, run_id="r1", tag="origin:r1"), SETTINGS.job)
    assert (conclusion.state, conclusion.result.exit_code) == ("failed", 2)
    assert "the GitHub token was rejected" in conclusion.message and SETTINGS.github.token not in conclusion.message


def test_an_issue_that_is_not_there_is_named_by_its_number_before_any_write():
    forge = MemoryForge(permissions={"alice": "write"})
    conclusion = run_github_job(JobContext(labeled(), forge, run_id="r1", tag="origin:r1"), SETTINGS.job)
    assert (conclusion.state, conclusion.result.exit_code) == ("failed", 2)
    assert conclusion.message.startswith("#7 is not an issue or pull request of octo/calendar")
    assert forge.reactions == [] and forge.comments == [] and forge.check_runs == {}


def test_a_repository_that_cannot_be_read_ends_the_tracking_comment_with_the_reason():
    forge = MemoryForge(permissions={"alice": "write"}, issues={7: ISSUE}).refuse("repository", 404)
    conclusion = run_github_job(JobContext(labeled(), forge, run_id="r1", tag="origin:r1"), SETTINGS.job)
    assert (conclusion.state, conclusion.result.exit_code) == ("failed", 2)
    [tracking] = forge.comments
    assert forge.reactions == [(("issue", 7), "eyes")]
    assert "could not finish this run" in tracking.body and "cannot be read with this token" in tracking.body
    assert marker("run", "origin:r1") in tracking.body


def test_a_job_run_again_edits_its_own_comment_and_never_one_it_did_not_write():
    forge = MemoryForge(permissions={"alice": "write"}, issues={7: ISSUE}).refuse("repository", 404)
    tag = marker("run", "origin:r1")
    forge.comments = [Comment(100, 7, f"copied marker {tag}", author="mallory"),
                      Comment(101, 7, f"👀 decode-bot is working on this.\n\n{tag}", author=BOT)]
    run_github_job(JobContext(labeled(), forge, run_id="r1", tag="origin:r1",
                              attempt=1), SETTINGS.job)  # released at a server stop
    assert [c.id for c in forge.comments] == [100, 101]
    assert forge.comments[0].body == f"copied marker {tag}"
    assert "could not finish this run" in forge.comments[1].body
