"""A review's first steps and its thread replies against the in-process `Forge`: no HTTP, no git, no sandbox."""

from __future__ import annotations

from bot.config import Settings
from bot.github.job import JobContext, run_github_job
from bot.github.plan import Threads
from bot.github.publish import answer_threads
from bot.github.work import Review
from tests.support.forge import MemoryForge

SETTINGS = Settings(github_token="ghp_" + "m" * 36, github_webhook_secret="s")


def test_a_readers_decode_review_gets_one_polite_reply_and_no_reaction():
    forge = MemoryForge(permissions={"rita": "read"})
    work = Review(repo="octo/calendar", number=9, sender_login="rita", sender_type="User", review_id=55,
                  instructions="fix it")
    for _ in range(2):
        assert run_github_job(JobContext(work, forge, run_id="r1", tag="origin:r1"), SETTINGS.job).state == "skipped"
    [reply] = forge.comments
    assert "@rita" in reply.body and forge.reactions == [] and forge.replies == []


def test_each_thread_is_answered_once_however_often_the_answer_is_given():
    forge = MemoryForge()
    threads = Threads(number=9, review_id=55, first_comments=(11, 12))
    for text in ("✅ Addressed in abc", "✅ Addressed in def"):
        answer_threads(forge, "octo/calendar", threads, text)
    assert [(thread, reply.body.split("\n")[0]) for thread, reply in forge.replies] == [
        (11, "✅ Addressed in abc"), (12, "✅ Addressed in abc")]
