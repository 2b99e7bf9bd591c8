"""The fake GitHub against the real clients: PyGithub, PyJWT-signed app auth and git."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
import requests
from github import Auth, Github, GithubException, GithubIntegration

from tests.fakes.github import FakeGitHub
from tests.fakes.github_auth import ApiError
from tests.fakes.openapi import OCTOKIT_OPENAPI_VERSION, OpenApiUnavailable, load_routes

GIT_ENV = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent", "GIT_TERMINAL_PROMPT": "0",
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_ASKPASS": "/bin/false",
    "GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "T",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """git in `cwd`; with `check`, a failure's assertion carries git's stderr (a flake is then diagnosable)."""
    done = subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, capture_output=True, text=True)
    assert not check or done.returncode == 0, f"git {args[0]} exited {done.returncode}: {done.stderr[-1000:]}"
    return done


def authed(url: str, token: str) -> str:
    return url.replace("http://", f"http://x-access-token:{token}@")


def client(fake: FakeGitHub, token: str | None = None) -> Github:
    """PyGithub without retries and without its client-side pacing (0.25 s per request, 1 s per write)."""
    return Github(auth=Auth.Token(token or fake.token), base_url=fake.api_url, retry=None,
                  seconds_between_requests=None, seconds_between_writes=None)


def push_branch(fake: FakeGitHub, tmp_path: Path, owner: str, repo: str, branch: str, change: str = "x",
                token: str | None = None) -> str:
    work = tmp_path / f"work-{branch.replace('/', '-')}"
    git(tmp_path, "clone", "-q", authed(fake.git_url(owner, repo), token or fake.token), str(work))
    git(work, "checkout", "-q", "-b", branch)
    (work / "change.txt").write_text(change)
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", f"change on {branch}")
    git(work, "push", "-q", "origin", branch)
    return git(work, "rev-parse", "HEAD").stdout.strip()


def test_token_mode_issue_comment_reaction_flow(fake_github: FakeGitHub) -> None:
    fake_github.add_repo("acme", "widgets", {"README.md": "hi\n"})
    number = fake_github.add_issue("acme", "widgets", "Retry is fixed", "Make it configurable", user="alice",
                                   labels=["agent"])
    repo = client(fake_github).get_repo("acme/widgets")
    assert (repo.full_name, repo.default_branch) == ("acme/widgets", "main")
    assert repo.clone_url == fake_github.git_url("acme", "widgets")
    issue = repo.get_issue(number)
    assert (issue.title, issue.user.login, [x.name for x in issue.labels]) == ("Retry is fixed", "alice", ["agent"])
    assert issue.pull_request is None

    comment = issue.create_comment("working on it <!-- decode -->")
    comment.edit("done: see the PR")
    assert [c["body"] for c in fake_github.comments("acme", "widgets", number)] == ["done: see the PR"]
    assert fake_github.comments("acme", "widgets", number)[0]["user"]["login"] == "github-actions[bot]"
    assert comment.create_reaction("rocket").content == "rocket"
    issue.create_reaction("eyes")
    issue.create_reaction("eyes")  # the same user again: 200, still one reaction
    assert [r["content"] for r in fake_github.reactions("acme", "widgets", issue=number)] == ["eyes"]
    assert [c.status for c in fake_github.calls("POST", "/reactions$")] == [201, 201, 200]

    with pytest.raises(GithubException) as too_long:
        issue.create_comment("x" * 65537)
    assert too_long.value.status == 422
    assert "body is too long (maximum is 65536 characters)" in str(too_long.value.data)


def test_permissions_follow_githubs_legacy_mapping(fake_github: FakeGitHub) -> None:
    fake_github.add_repo("acme", "widgets")
    fake_github.set_permission("acme", "widgets", "mia", "maintain")
    fake_github.set_permission("acme", "widgets", "tom", "triage")
    fake_github.add_user("rita")
    repo = client(fake_github).get_repo("acme/widgets")
    assert repo.get_collaborator_permission("mia") == "write"
    assert repo.get_collaborator_role_name("mia") == "maintain"
    assert repo.get_collaborator_permission("tom") == "read"
    assert repo.get_collaborator_permission("rita") == "read"  # public repository
    assert repo.get_collaborator_permission("acme") == "admin"


def test_pull_requests_create_duplicate_and_filters(fake_github: FakeGitHub, tmp_path: Path) -> None:
    fake_github.add_repo("acme", "widgets", {"README.md": "hi\n"})
    issue = fake_github.add_issue("acme", "widgets", "Bug")
    sha = push_branch(fake_github, tmp_path, "acme", "widgets", "decode/issue-1-bug")
    assert fake_github.branch_sha("acme", "widgets", "decode/issue-1-bug") == sha
    repo = client(fake_github).get_repo("acme/widgets")

    pr = repo.create_pull(base="main", head="decode/issue-1-bug", title="Fix bug", body="Fixes #1", draft=True)
    assert pr.number == issue + 1  # issues and pulls share one sequence
    assert (pr.head.sha, pr.head.ref, pr.base.ref, pr.draft) == (sha, "decode/issue-1-bug", "main", True)
    assert repo.get_issue(pr.number).pull_request is not None
    with pytest.raises(GithubException) as duplicate:
        repo.create_pull(base="main", head="acme:decode/issue-1-bug", title="again", body="")
    assert duplicate.value.status == 422
    assert duplicate.value.data["errors"][0]["message"] == "A pull request already exists for acme:decode/issue-1-bug."
    with pytest.raises(GithubException) as empty:
        repo.create_pull(base="main", head="main", title="nothing", body="")
    assert "No commits between main and main" in str(empty.value.data)

    assert [p.number for p in repo.get_pulls(state="open", head="acme:decode/issue-1-bug")] == [pr.number]
    assert list(repo.get_pulls(state="open", head="acme:other")) == []
    assert len(list(repo.get_pulls(head="decode/issue-1-bug"))) == 1  # no "owner:": GitHub ignores the filter
    pr.edit(body="updated body", state="closed")
    assert fake_github.pull("acme", "widgets", pr.number)["state"] == "closed"
    assert list(repo.get_pulls(state="open")) == []
    assert git(tmp_path, "ls-remote", authed(fake_github.git_url("acme", "widgets"), fake_github.token),
               f"refs/pull/{pr.number}/head").stdout.split()[0] == sha


def test_review_comment_reply_and_reaction(fake_github: FakeGitHub, tmp_path: Path) -> None:
    fake_github.add_repo("acme", "widgets")
    push_branch(fake_github, tmp_path, "acme", "widgets", "feature")
    number = fake_github.add_pull("acme", "widgets", "Feature", head_branch="feature", user="alice")
    cid = fake_github.add_review_comment("acme", "widgets", number, "/decode rename this", path="change.txt",
                                         line=1, user="alice")
    repo = client(fake_github).get_repo("acme/widgets")
    pull = repo.get_pull(number)
    comment = pull.get_review_comment(cid)
    assert (comment.path, comment.line, comment.body) == ("change.txt", 1, "/decode rename this")
    comment.create_reaction("eyes")
    reply = pull.create_review_comment_reply(cid, "on it")
    assert reply.in_reply_to_id == cid
    assert [r["content"] for r in fake_github.reactions("acme", "widgets", review_comment=cid)] == ["eyes"]
    pull.create_issue_comment("done")
    assert fake_github.comments("acme", "widgets", number)[0]["body"] == "done"


def test_fork_pull_has_refs_pull_head(fake_github: FakeGitHub, tmp_path: Path) -> None:
    fake_github.add_repo("acme", "widgets")
    fake_github.add_fork("acme", "widgets", "eve")
    sha = push_branch(fake_github, tmp_path, "eve", "widgets", "patch-1", token=fake_github.add_token("eve"))
    number = fake_github.add_pull("acme", "widgets", "From a fork", head_branch="patch-1", user="eve",
                                  head_repo=("eve", "widgets"))
    pull = client(fake_github).get_repo("acme/widgets").get_pull(number)
    assert (pull.head.repo.full_name, pull.head.sha) == ("eve/widgets", sha)
    out = git(tmp_path, "ls-remote", authed(fake_github.git_url("acme", "widgets"), fake_github.token))
    assert f"{sha}\trefs/pull/{number}/head" in out.stdout


def test_pushes_to_a_fork_follow_allow_edits_by_maintainers(fake_github: FakeGitHub, tmp_path: Path) -> None:
    fake_github.add_repo("acme", "widgets")
    fake_github.add_fork("acme", "widgets", "eve")
    fake_github.set_permission("acme", "widgets", "maria", "maintain")
    push_branch(fake_github, tmp_path, "eve", "widgets", "patch-1", token=fake_github.add_token("eve"))
    fake_github.add_pull("acme", "widgets", "Fork", head_branch="patch-1", user="eve", head_repo=("eve", "widgets"),
                         maintainer_can_modify=True)
    maria, actions = fake_github.add_token("maria"), fake_github.token
    work = tmp_path / "work-patch-1"
    git(work, "commit", "-q", "--allow-empty", "-m", "maintainer")
    pushed = git(work, "push", "-q", authed(fake_github.git_url("eve", "widgets"), maria), "HEAD:patch-1", check=False)
    assert pushed.returncode == 0, pushed.stderr
    other = git(work, "push", "-q", authed(fake_github.git_url("eve", "widgets"), maria), "HEAD:main", check=False)
    assert other.returncode != 0 and "403" in other.stderr  # only the pull request's head branch
    workflow = git(work, "push", "-q", authed(fake_github.git_url("eve", "widgets"), actions), "HEAD:patch-1",
                   check=False)
    assert workflow.returncode != 0  # the Actions token never pushes to forks


def test_bad_or_missing_token_is_401(fake_github: FakeGitHub) -> None:
    fake_github.add_repo("acme", "widgets")
    answer = requests.get(f"{fake_github.api_url}/repos/acme/widgets", headers={"Authorization": "token nope"})
    assert answer.status_code == 401 and answer.json()["message"] == "Bad credentials"
    assert requests.get(f"{fake_github.api_url}/repos/acme/widgets").status_code == 401
    ok = requests.get(f"{fake_github.api_url}/repos/acme/widgets",
                      headers={"Authorization": f"Bearer {fake_github.token}"})
    assert ok.status_code == 200


def test_app_mode_mints_scoped_installation_tokens(fake_github: FakeGitHub) -> None:
    fake_github.add_repo("acme", "widgets")
    fake_github.add_repo("acme", "secret", private=True)
    app = Auth.AppAuth(fake_github.app_id, fake_github.private_key_pem)
    integration = GithubIntegration(auth=app, base_url=fake_github.api_url, seconds_between_requests=None,
                                    seconds_between_writes=None)
    installation = integration.get_repo_installation("acme", "widgets")
    assert installation.id == fake_github.installation_id
    assert integration.get_app().slug == "decode-bot"

    minted = integration.get_access_token(installation.id)
    assert minted.token.startswith("ghs_") and minted.expires_at.timestamp() > time.time() + 3500
    assert client(fake_github, minted.token).get_repo("acme/secret").private

    scoped = requests.post(f"{fake_github.api_url}/app/installations/{installation.id}/access_tokens",
                           json={"repositories": ["widgets"], "permissions": {"contents": "write"}},
                           headers={"Authorization": f"Bearer {app.create_jwt()}"})
    assert scoped.status_code == 201
    token = scoped.json()["token"]
    gh = client(fake_github, token)
    issue = gh.get_repo("acme/widgets").get_issue(fake_github.add_issue("acme", "widgets", "t"))
    issue.create_comment("hello from the app")
    assert fake_github.comments("acme", "widgets", issue.number)[0]["user"] == {
        **fake_github.comments("acme", "widgets", issue.number)[0]["user"], "login": "decode-bot[bot]", "type": "Bot"}
    with pytest.raises(GithubException) as elsewhere:
        gh.get_repo("acme/secret")
    assert elsewhere.value.status == 404
    assert [m["repositories"] for m in fake_github.minted] == [None, ["acme/widgets"]]

    fake_github.expire_tokens()
    with pytest.raises(GithubException) as expired:
        gh.get_repo("acme/widgets")
    assert expired.value.status == 401


@pytest.mark.parametrize("offsets, message", [  # seconds from now, taken when the test runs (not collected)
    ({"iat": -1200, "exp": -600}, "'Expiration time'"),
    ({"exp": 3600}, "'Expiration time'"),
    ({"iat": 600}, "'Issued at'"),
])
def test_bad_jwts_are_refused(fake_github: FakeGitHub, offsets: dict, message: str) -> None:
    claims = {name: int(time.time()) + offset for name, offset in offsets.items()}
    answer = requests.get(f"{fake_github.api_url}/app",
                          headers={"Authorization": f"Bearer {fake_github.app.sign(**claims)}"})
    assert answer.status_code == 401 and message in answer.json()["message"]


def test_a_jwt_from_another_issuer_is_refused(fake_github: FakeGitHub) -> None:
    answer = requests.get(f"{fake_github.api_url}/app",
                          headers={"Authorization": f"Bearer {fake_github.app.sign(iss='999')}"})
    assert answer.status_code == 401 and "'Issuer'" in answer.json()["message"]


def test_forged_jwt_is_refused(fake_github: FakeGitHub) -> None:
    other = FakeGitHub(fake_github.routes, app_id=fake_github.app_id)
    answer = requests.get(f"{fake_github.api_url}/app", headers={"Authorization": f"Bearer {other.app.sign()}"})
    assert answer.status_code == 401 and answer.json()["message"] == "A JSON web token could not be decoded"
    other.stop()


def test_git_clone_and_push_need_the_token(fake_github: FakeGitHub, tmp_path: Path) -> None:
    fake_github.add_repo("acme", "widgets", {"a.txt": "1\n"}, private=True)
    url = fake_github.git_url("acme", "widgets")
    refused = git(tmp_path, "clone", "-q", url, str(tmp_path / "anon"), check=False)
    assert refused.returncode != 0
    wrong = git(tmp_path, "clone", "-q", authed(url, "ghs_wrong"), str(tmp_path / "wrong"), check=False)
    assert wrong.returncode != 0
    sha = push_branch(fake_github, tmp_path, "acme", "widgets", "decode/run-1")
    assert fake_github.branch_sha("acme", "widgets", "decode/run-1") == sha
    assert (tmp_path / "work-decode-run-1" / "a.txt").read_text() == "1\n"

    reader = fake_github.add_token("rita")
    fake_github.set_permission("acme", "widgets", "rita", "read")
    git(tmp_path, "clone", "-q", authed(url, reader), str(tmp_path / "ro"))
    git(tmp_path / "ro", "commit", "-q", "--allow-empty", "-m", "nope")
    assert git(tmp_path / "ro", "push", "-q", "origin", "HEAD:main", check=False).returncode != 0


def test_fault_with_apply_creates_the_pull_and_still_fails(fake_github: FakeGitHub, tmp_path: Path) -> None:
    fake_github.add_repo("acme", "widgets")
    push_branch(fake_github, tmp_path, "acme", "widgets", "feature")
    fake_github.inject("POST", r"^/repos/acme/widgets/pulls$", 502, apply=True)
    repo = client(fake_github).get_repo("acme/widgets")
    with pytest.raises(GithubException) as failed:
        repo.create_pull(base="main", head="feature", title="t", body="b")
    assert failed.value.status == 502
    assert len(fake_github.pulls("acme", "widgets")) == 1
    assert repo.create_pull  # the next call is served normally again
    with pytest.raises(GithubException) as again:
        repo.create_pull(base="main", head="feature", title="t", body="b")
    assert again.value.status == 422


def test_rate_limit_presets(fake_github: FakeGitHub) -> None:
    fake_github.add_repo("acme", "widgets")
    fake_github.inject_secondary_rate_limit("GET", "/repos/acme/widgets$")
    fake_github.inject_primary_rate_limit("GET", "/repos/acme/widgets$")
    fake_github.inject("GET", "/repos/acme/widgets$", 429, headers={"retry-after": "1"})
    headers = {"Authorization": f"token {fake_github.token}"}
    url = f"{fake_github.api_url}/repos/acme/widgets"
    first, second, third, fourth = (requests.get(url, headers=headers) for _ in range(4))
    assert first.status_code == 403 and first.headers["retry-after"] == "1"
    assert "secondary rate limit" in first.json()["message"]
    assert second.status_code == 403 and second.headers["x-ratelimit-remaining"] == "0"
    assert 0 < int(second.headers["x-ratelimit-reset"]) - time.time() <= 2
    assert third.status_code == 429
    assert fourth.status_code == 200


def test_pygithub_retry_rides_out_a_secondary_rate_limit(fake_github: FakeGitHub) -> None:
    fake_github.add_repo("acme", "widgets")
    fake_github.inject_secondary_rate_limit("GET", "/repos/acme/widgets$")
    gh = Github(auth=Auth.Token(fake_github.token), base_url=fake_github.api_url, seconds_between_requests=None,
                seconds_between_writes=None)
    assert gh.get_repo("acme/widgets").name == "widgets"
    assert [r.status for r in fake_github.calls("GET", "/repos/acme/widgets$")] == [403, 200]


def test_unknown_endpoint_is_caught(fake_github: FakeGitHub) -> None:
    fake_github.add_repo("acme", "widgets")
    answer = requests.get(f"{fake_github.api_url}/repos/acme/widgets/made-up",
                          headers={"Authorization": f"token {fake_github.token}"})
    assert answer.status_code == 404 and answer.json()["message"] == "Not Found"
    assert fake_github.unknown == ["GET /repos/acme/widgets/made-up"]
    fake_github.unknown.clear()  # the fixture's teardown would fail the test otherwise


def test_openapi_routes_know_githubs_endpoints() -> None:
    routes = load_routes()
    assert routes.version == OCTOKIT_OPENAPI_VERSION
    assert routes.match("POST", "/repos/o/r/pulls") == "/repos/{owner}/{repo}/pulls"
    assert routes.match("GET", "/repos/o/r/branches/decode/issue-3-fix") == "/repos/{owner}/{repo}/branches/{branch}"
    assert routes.match("POST", "/repos/o/r/pulls/comments/9/reactions") == \
        "/repos/{owner}/{repo}/pulls/comments/{comment_id}/reactions"
    assert routes.match("GET", "/repos/o/r/made-up") is None
    assert routes.match("DELETE", "/app") is None  # a real path, but not with that method


def test_fixture_teardown_reports_unknown_requests() -> None:
    from tests.fakes.github import openapi_routes
    fake = FakeGitHub(openapi_routes()).start()
    try:
        requests.post(f"{fake.api_url}/repos/acme/widgets/issues/1/upvote")
        assert fake.unknown == ["POST /repos/acme/widgets/issues/1/upvote"]
    finally:
        fake.stop()


def test_api_error_payload_is_githubs_shape() -> None:
    assert ApiError(401, "Bad credentials").payload()["message"] == "Bad credentials"


def test_comment_lists_paginate_like_github(fake_github: FakeGitHub) -> None:
    fake_github.add_repo("acme", "widgets")
    number = fake_github.add_issue("acme", "widgets", "long thread")
    for k in range(35):
        fake_github.add_comment("acme", "widgets", number, f"part {k}", user="decode-bot[bot]")
    issue = client(fake_github).get_repo("acme/widgets").get_issue(number)
    assert [c.body for c in issue.get_comments()] == [f"part {k}" for k in range(35)]
    assert [c.query.get("page") for c in fake_github.calls("GET", "/comments$")] == [None, "2"]


def test_a_failed_fetch_of_the_description_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(OpenApiUnavailable, match="npm pack @octokit/openapi@0.0.0-no-such-version"):
        load_routes("0.0.0-no-such-version", tmp_path)
