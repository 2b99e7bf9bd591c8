"""Creating and updating check runs on the fake GitHub follows GitHub's rules, through PyGithub."""

from __future__ import annotations

import pytest
from github import Auth, Github, GithubException

from tests.fakes.github import FakeGitHub
from tests.fakes.github_check_runs import decode_runs

OWNER, NAME = "octo", "calendar"


def repo_as(fake: FakeGitHub, token: str):
    return Github(auth=Auth.Token(token), base_url=fake.api_url, retry=None, seconds_between_requests=None,
                  seconds_between_writes=None).get_repo(f"{OWNER}/{NAME}")


@pytest.fixture
def head(fake_github: FakeGitHub) -> str:
    fake_github.add_repo(OWNER, NAME, {"README.md": "hi\n"})
    return fake_github.branch_sha(OWNER, NAME, "main")


def test_an_installation_token_with_checks_write_makes_and_completes_a_check_run(fake_github, head):
    repo = repo_as(fake_github, fake_github.mint_installation_token(None, None).value)
    run = repo.create_check_run("decode-bot", head, status="queued", external_id="x",
                                output={"title": "Queued", "summary": "Waiting."})
    assert (run.status, run.conclusion, run.external_id, run.app.slug) == ("queued", None, "x", "decode-bot")
    run.edit(conclusion="success", output={"title": "Done", "summary": "ok", "text": "details"})
    [stored] = decode_runs(fake_github, OWNER, NAME)
    assert stored["history"] == [("queued", None, "Queued"), ("completed", "success", "Done")]
    assert stored["completed_at"] and repo.get_check_run(run.id).output.text == "details"


@pytest.mark.parametrize("fields, why", [
    ({"status": "completed"}, "conclusion"),
    ({"status": "waiting"}, "is not one of"),
    ({"conclusion": "stale"}, "Only GitHub"),
    ({"output": {"title": "no summary"}}, "title and summary"),
    ({"output": {"title": "t", "summary": "s" * 65_536}}, "too long"),
])
def test_github_s_validation_is_422(fake_github, head, fields, why):
    repo = repo_as(fake_github, fake_github.mint_installation_token(None, None).value)
    with pytest.raises(GithubException) as refused:
        repo.create_check_run("decode-bot", head, **fields)
    assert refused.value.status == 422 and why in str(refused.value.data)


def test_an_unknown_commit_is_422(fake_github, head):
    repo = repo_as(fake_github, fake_github.mint_installation_token(None, None).value)
    with pytest.raises(GithubException) as refused:
        repo.create_check_run("decode-bot", "0" * 40)
    assert refused.value.status == 422 and "No commit found" in str(refused.value.data)


def test_only_apps_with_checks_write_make_check_runs_and_only_the_maker_updates_one(fake_github, head):
    fake_github.add_user("alice")
    fake_github.set_permission(OWNER, NAME, "alice", "admin")
    for token, message in ((fake_github.add_token("alice"), "You must authenticate via a GitHub App."),
                           (fake_github.mint_installation_token(None, {"checks": "read"}).value,
                            "Resource not accessible by integration")):
        with pytest.raises(GithubException) as refused:
            repo_as(fake_github, token).create_check_run("decode-bot", head)
        assert refused.value.status == 403 and refused.value.data["message"] == message
    by_actions = repo_as(fake_github, fake_github.token).create_check_run("decode-bot", head)
    assert by_actions.app.slug == "github-actions"
    app_repo = repo_as(fake_github, fake_github.mint_installation_token(None, None).value)
    with pytest.raises(GithubException) as refused:
        app_repo.get_check_run(by_actions.id).edit(status="in_progress")
    assert refused.value.status == 403
