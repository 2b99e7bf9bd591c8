"""Sign-in with GitHub through the App's OAuth client, against the fake GitHub's web flow and REST API."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest
import requests

from bot.jobs.sqlite import Store
from tests.fakes.github_oauth import sign_in_as
from tests.support.runs import add_run, github_app


@pytest.fixture
def env(fake_github, tmp_path):
    for owner, name, private in (("octo", "app", False), ("octo", "vault", True), ("octo", "public", False)):
        fake_github.add_repo(owner, name, private=private)
    fake_github.set_permission("octo", "app", "alice", "read")
    fake_github.set_permission("octo", "vault", "bob", "write")
    store = Store(tmp_path / "jobs.sqlite3")
    app = github_app(tmp_path, store, fake_github)
    setup = app.test_client()
    runs = {repo: add_run(setup, store, repo=repo, number=n) for n, repo in
            enumerate(("octo/app", "octo/vault", "octo/public"), start=1)}
    yield app, store, runs
    store.close()


def sign_in(app, fake_github, login: str):
    """A browser's sign-in as `login`: /login, GitHub's authorize page, back to /login/callback."""
    sign_in_as(fake_github, login)
    client = app.test_client()
    to_github = client.get("/login")
    assert to_github.status_code == 302
    assert to_github.location.startswith(fake_github.web_url + "/login/oauth/authorize")
    back = requests.get(to_github.location, allow_redirects=False, timeout=10)
    assert back.status_code == 302, back.text
    answer = client.get(urlsplit(back.headers["location"])._replace(scheme="", netloc="").geturl())
    return client, answer


def shown(client) -> list[str]:
    return re.findall(r'data-run="(job-\d+)"', client.get("/").get_data(as_text=True))


def test_two_users_sign_in_and_each_sees_only_their_repositories_runs(env, fake_github):
    app, _, runs = env
    alice, answer = sign_in(app, fake_github, "alice")
    assert answer.status_code == 302 and answer.location == "/"
    page = alice.get("/").get_data(as_text=True)
    assert "signed in as <strong>alice</strong>" in page
    assert shown(alice) == [runs["octo/app"]]  # public octo/public is not listed: no explicit permission
    bob, _ = sign_in(app, fake_github, "bob")
    assert shown(bob) == [runs["octo/vault"]]
    assert shown(alice) == [runs["octo/app"]]
    listed = f"/user/installations/{fake_github.installation_id}/repositories"
    assert {c.path for c in fake_github.calls("GET")} >= {"/user", "/user/installations", listed}


def test_the_session_cookie_is_httponly_and_samesite(env, fake_github):
    app, *_ = env
    client = app.test_client()
    header = client.get("/login").headers["Set-Cookie"]
    assert "HttpOnly" in header and "SameSite=Lax" in header and "Secure" not in header


def test_the_cookie_is_secure_behind_https(fake_github, tmp_path):
    store = Store(tmp_path / "jobs.sqlite3")
    app = github_app(tmp_path, store, fake_github, public_url="https://decode.example.org")
    answer = app.test_client().get("/login")
    assert "Secure" in answer.headers["Set-Cookie"]
    assert parse_qs(urlsplit(answer.location).query)["redirect_uri"] == ["https://decode.example.org/login/callback"]
    store.close()


def test_a_callback_with_another_state_is_refused(env, fake_github):
    app, *_ = env
    sign_in_as(fake_github, "alice")
    victim = app.test_client()
    victim.get("/login")
    attacker = app.test_client()
    back = requests.get(attacker.get("/login").location, allow_redirects=False, timeout=10).headers["location"]
    code = parse_qs(urlsplit(back).query)["code"][0]
    forged = victim.get(f"/login/callback?code={code}&state=attacker-state")
    assert forged.status_code == 400 and "sign in again" in forged.get_data(as_text=True)
    assert shown(victim) == []
    assert victim.get(f"/login/callback?code={code}").status_code == 400  # the state was used up
    victim.get("/login")
    assert victim.get(f"/login/callback?code={code}&state=%C3%A9t%C3%A9").status_code == 400


def test_a_used_code_and_a_wrong_client_secret_fail_with_what_to_do(env, fake_github, tmp_path):
    app, store, _ = env
    client, _ = sign_in(app, fake_github, "alice")
    again = app.test_client()
    state = parse_qs(urlsplit(again.get("/login").location).query)["state"][0]
    reused = again.get(f"/login/callback?code=used-or-made-up&state={state}")
    assert reused.status_code == 502 and "bad_verification_code" in reused.get_data(as_text=True)
    wrong = github_app(tmp_path, store, fake_github, github_client_secret="not-the-secret")
    _, refused = sign_in(wrong, fake_github, "alice")
    text = refused.get_data(as_text=True)
    assert refused.status_code == 502 and "GITHUB_CLIENT_SECRET" in text and "not-the-secret" not in text


def test_github_refusing_the_consent_is_a_page_not_a_crash(env, fake_github):
    app, *_ = env
    client = app.test_client()
    state = parse_qs(urlsplit(client.get("/login").location).query)["state"][0]
    answer = client.get(f"/login/callback?error=access_denied&state={state}")
    assert answer.status_code == 400 and "access_denied" in answer.get_data(as_text=True)
