"""The one GitHub retry policy, against the fake GitHub's injected faults."""

from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from github import GithubException

from bot.github.auth import AppCredentials, TokenCredentials
from bot.github.forge import GitHubForge
from bot.github.retry import GitHubRetry
from tests.support.server import free_port


@pytest.fixture
def forge(fake_github):
    fake_github.add_repo("octo", "r", {"a.txt": "a\n"})
    sleeps: list[float] = []
    forge = GitHubForge(TokenCredentials(fake_github.token, fake_github.api_url),
                        retry=GitHubRetry(sleep=sleeps.append))
    forge.sleeps = sleeps
    return forge


def test_server_errors_are_retried(fake_github, forge):
    number = fake_github.add_issue("octo", "r", "t", "b")
    fake_github.inject("GET", r"/repos/octo/r/issues/\d+$", status=502, times=2)
    assert forge.issue("octo/r", number).title == "t"
    assert len(forge.sleeps) == 2


def test_a_primary_rate_limit_waits_until_the_reset(fake_github, forge):
    number = fake_github.add_issue("octo", "r", "t", "b")
    fake_github.inject_primary_rate_limit("GET", r"/repos/octo/r/issues/\d+$", reset_in=5)
    assert forge.issue("octo/r", number).title == "t"
    assert 4.0 <= forge.sleeps[0] <= 7.0


def test_logic_errors_are_not_retried(fake_github, forge):
    with pytest.raises(GithubException) as e:
        forge.issue("octo/r", 999)
    assert e.value.status == 404 and forge.sleeps == []


def test_retries_are_bounded(fake_github, forge):
    number = fake_github.add_issue("octo", "r", "t", "b")
    fake_github.inject("GET", r"/repos/octo/r/issues/\d+$", status=500, times=50)
    with pytest.raises(GithubException):
        forge.issue("octo/r", number)
    assert len(forge.sleeps) == forge.retry.attempts - 1


def test_a_slow_answer_gets_every_attempt_and_a_refused_connection_three(fake_github, forge):
    fake_github.latency_s = 1.0
    asked: list[int] = []

    def ask() -> int:
        asked.append(1)
        if len(asked) == forge.retry.attempts:
            fake_github.latency_s = 0.0  # GitHub answers in time at last
        return requests.get(fake_github.api_url + "/repos/octo/r", timeout=0.3,
                            headers={"authorization": f"token {fake_github.token}"}).status_code

    assert forge.retry.call(ask) == 200 and len(asked) == forge.retry.attempts
    refused: list[int] = []

    def knock() -> int:
        refused.append(1)
        return requests.get(f"http://127.0.0.1:{free_port()}/", timeout=0.3).status_code

    with pytest.raises(requests.ConnectionError):
        forge.retry.call(knock)
    assert len(refused) == forge.retry.unreachable_attempts == 3  # a wrong GITHUB_API_URL is said soon


def test_a_lost_answer_to_a_comment_does_not_double_it(fake_github, forge):
    number = fake_github.add_issue("octo", "r", "t", "b")
    fake_github.inject("POST", r"/repos/octo/r/issues/\d+/comments$", status=502, apply=True)
    forge.post_comment("octo/r", number, "hello <!-- m1 -->", "<!-- m1 -->")
    assert [c["body"] for c in fake_github.comments("octo", "r", number)] == ["hello <!-- m1 -->"]


def test_installation_tokens_are_cached_per_repository(fake_github):
    fake_github.add_repo("octo", "r", {"a.txt": "a\n"})
    fake_github.add_repo("octo", "other", {"a.txt": "a\n"})
    creds = AppCredentials(str(fake_github.app_id), fake_github.private_key_pem, fake_github.api_url)
    first = creds.token_for("octo/r")
    assert creds.token_for("octo/r") == first and len(fake_github.minted) == 1
    assert creds.token_for("octo/other") != first and len(fake_github.minted) == 2
    assert creds.bot_login() == "decode-bot[bot]"


def test_a_slow_mint_for_one_repository_keeps_no_other_waiting(fake_github):
    fake_github.add_repo("octo", "r", {"a.txt": "a\n"})
    fake_github.add_repo("octo", "other", {"a.txt": "a\n"})
    creds = AppCredentials(str(fake_github.app_id), fake_github.private_key_pem, fake_github.api_url)
    pause = fake_github.pause("GET", r"^/repos/octo/r/installation$")  # GitHub slow to answer for octo/r
    with ThreadPoolExecutor(2) as pool:
        slow = pool.submit(creds.token_for, "octo/r")
        assert pause.reached.wait(10)
        other = pool.submit(creds.token_for, "octo/other")
        try:
            assert other.result(timeout=10) and not slow.done()  # minted while octo/r's mint still waits
        finally:
            pause.release(drop=False)
        assert slow.result(timeout=10) != other.result()
    assert len(fake_github.minted) == 2
