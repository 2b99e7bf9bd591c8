"""/setup and its callback through the Flask app, against the fake GitHub's manifest flow: the manifest,
the setup key, the single-use state, a failed conversion, and a configured server that never offers the form."""

from __future__ import annotations

import html
import json
import re
import stat
import urllib.error
import urllib.request
from urllib.parse import parse_qs, urlsplit

import pytest
import requests

from bot.github.app_credentials import load
from bot.config import Settings
from bot.core.errors import ConfigError
from bot.server import create_app
from bot.server.manifest import manifest
from bot.server.setup import flow_of
from tests.server.conftest import SECRET, delivery
from tests.support.server import Server, env, setup_link  # noqa: F401 (fixture)
from tests.support.webhooks import labeled

PUBLIC = "https://decode.example.com"


@pytest.fixture
def settings(fake_github, tmp_path) -> Settings:
    return Settings(data_dir=tmp_path / "data", github_api_url=fake_github.api_url, public_url=PUBLIC)


def app_for(settings: Settings, store, **kw):
    app = create_app(settings, store, **kw)
    return app, app.test_client()


def form(page: str) -> tuple[str, dict]:
    """The create form's action and its manifest."""
    action = re.search(r'<form method="post" action="([^"]+)"', page)
    value = re.search(r'name="manifest" value="([^"]+)"', page)
    assert action and value, page
    return html.unescape(action.group(1)), json.loads(html.unescape(value.group(1)))


def created(fake_github, client, key: str, org: str = "") -> tuple[dict, object]:
    """Open /setup, POST its manifest to the fake GitHub as the browser would, follow GitHub's redirect
    into the callback; (the conversion's App, the callback's answer)."""
    page = client.get("/setup", query_string={"key": key, "org": org}).get_data(as_text=True)
    action, sent = form(page)
    back = requests.post(action, data={"manifest": json.dumps(sent)}, allow_redirects=False, timeout=10)
    assert back.status_code == 302, back.text
    location = urlsplit(back.headers["location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == f"{PUBLIC}/setup/callback"
    answer = client.get("/setup/callback?" + location.query)
    return fake_github.created_apps[-1], answer


def test_the_manifest_asks_for_what_decode_bot_does_and_no_more(settings):
    m = manifest(settings)
    assert m["default_permissions"] == {"contents": "write", "issues": "write", "pull_requests": "write",
                                        "metadata": "read", "actions": "read", "checks": "write"}
    assert set(m["default_events"]) >= {"issues", "issue_comment", "pull_request_review_comment",
                                        "pull_request_review", "check_suite", "check_run"}
    assert not set(m["default_events"]) & {"workflow_dispatch", "push", "pull_request", "installation"}
    assert m["hook_attributes"] == {"url": f"{PUBLIC}/webhook", "active": True}
    assert m["redirect_url"] == f"{PUBLIC}/setup/callback" and m["callback_urls"] == [f"{PUBLIC}/login/callback"]
    assert m["public"] is False and m["url"] == PUBLIC
    assert manifest(settings.replace(public_url=None)) is None


def test_the_urls_in_the_manifest_are_routes_this_server_serves(settings, store):
    app, _ = app_for(settings, store)
    m = manifest(settings)
    adapter = app.url_map.bind("decode.example.com")
    for url, method in [(m["hook_attributes"]["url"], "POST"), (m["redirect_url"], "GET"),
                        *[(u, "GET") for u in m["callback_urls"]]]:
        assert adapter.match(urlsplit(url).path, method=method), url


def test_without_a_public_url_the_page_says_to_set_it_and_offers_no_manifest(settings, store):
    app, client = app_for(settings.replace(public_url=None), store)
    res = client.get("/setup", query_string={"key": flow_of(app).key})
    page = res.get_data(as_text=True)
    assert res.status_code == 200 and "DECODE_PUBLIC_URL" in page and "<form" not in page


@pytest.mark.parametrize("key", [None, "", "not-the-key"])
def test_without_the_setup_key_no_form_and_no_state_is_handed_out(settings, store, key):
    app, client = app_for(settings, store)
    res = client.get("/setup", query_string={"key": key} if key is not None else {})
    page = res.get_data(as_text=True)
    assert res.status_code == 403 and "printed in its log" in page and "<form" not in page
    assert not flow_of(app).states


def test_the_form_posts_the_manifest_to_the_account_or_the_organization_with_a_fresh_state(settings, store):
    app, client = app_for(settings, store)
    key = flow_of(app).key
    res = client.get("/setup", query_string={"key": key})
    action, sent = form(res.get_data(as_text=True))
    web = settings.github.web_url
    assert action.startswith(f"{web}/settings/apps/new?state=") and sent == manifest(settings)
    policy = res.headers["Content-Security-Policy"]
    assert "default-src 'none'" in policy and "script-src" not in policy and f"form-action 'self' {web}" in policy
    assert res.headers["Referrer-Policy"] == "no-referrer"
    org_action, _ = form(client.get("/setup", query_string={"key": key, "org": "acme"}).get_data(as_text=True))
    assert org_action.startswith(f"{web}/organizations/acme/settings/apps/new?state=")
    assert parse_qs(urlsplit(org_action).query)["state"] != parse_qs(urlsplit(action).query)["state"]
    bad = client.get("/setup", query_string={"key": key, "org": "../evil"})
    assert bad.status_code == 400 and "not an organization name" in bad.get_data(as_text=True)
    assert 'method="post"' not in bad.get_data(as_text=True)


def test_unconfigured_the_webhook_answers_503_signed_or_not_and_stores_nothing(settings, store):
    _, client = app_for(settings, store)
    body, headers = delivery("issues", labeled())
    for sent in (headers, {**headers, "X-Hub-Signature-256": ""}):
        res = client.post("/webhook", data=body, headers=sent)
        assert res.status_code == 503 and "finish setup at /setup" in res.get_json()["error"]
    assert store.counts()["queued"] == 0


def test_the_callback_stores_the_app_and_the_same_app_then_takes_signed_deliveries(settings, store, fake_github):
    configured = []
    app, client = app_for(settings, store, on_configured=configured.append)
    made, answer = created(fake_github, client, flow_of(app).key, org="acme")
    assert answer.status_code == 303 and answer.headers["location"].endswith("/setup")
    assert fake_github.manifests[-1]["owner"] == "acme"
    saved = load(settings.store.data_dir)
    path = settings.store.data_dir / "app.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert (saved.id, saved.slug, saved.pem) == (made["id"], made["slug"], fake_github.app.private_key_pem)
    assert saved.html_url == f"{fake_github.web_url}/apps/{made['slug']}" and saved.client_id.startswith("Iv23")
    [now] = configured  # the hook saw the App's settings before the webhook took them
    assert now.github.app_id == str(saved.id) and now.github.webhook_secret == saved.webhook_secret
    body, headers = delivery("issues", labeled(), secret=saved.webhook_secret)
    assert client.post("/webhook", data=body, headers=headers).status_code == 202
    body, headers = delivery("issues", labeled(), secret=SECRET)
    assert client.post("/webhook", data=body, headers=headers).status_code == 401
    page = client.get("/setup", query_string={"key": flow_of(app).key}).get_data(as_text=True)
    assert f'href="{saved.html_url}/installations/new"' in page and "<form" not in page
    assert not any(s in page for s in (saved.pem.splitlines()[1], saved.webhook_secret, saved.client_secret))


def test_a_second_callback_finds_the_server_configured_and_converts_nothing(settings, store, fake_github):
    app, client = app_for(settings, store)
    created(fake_github, client, flow_of(app).key)
    before = load(settings.store.data_dir)
    again = client.get(f"/setup/callback?code=abc&state={flow_of(app).issue()}")
    assert again.status_code == 409 and load(settings.store.data_dir) == before
    assert len(fake_github.calls("POST", "^/app-manifests/")) == 1


@pytest.mark.parametrize("query", ["code=abc&state=forged", "code=abc", "state=&code=abc"])
def test_a_state_this_server_did_not_hand_out_is_refused_and_nothing_is_stored(settings, store, fake_github, query):
    _, client = app_for(settings, store)
    res = client.get(f"/setup/callback?{query}")
    assert res.status_code == 400 and "start again at /setup" in res.get_data(as_text=True)
    assert load(settings.store.data_dir) is None and not fake_github.calls("POST", "^/app-manifests/")


def test_a_failed_conversion_says_so_stores_nothing_and_spends_the_state(settings, store, fake_github):
    app, client = app_for(settings, store)
    state = flow_of(app).issue()
    res = client.get(f"/setup/callback?code=0123456789abcdef&state={state}")
    page = res.get_data(as_text=True)
    assert res.status_code == 502 and "answered 404" in page and "start again at /setup" in page, page
    assert load(settings.store.data_dir) is None and not (settings.store.data_dir / "app.json").exists()
    assert client.get(f"/setup/callback?code=0123456789abcdef&state={state}").status_code == 400
    body, headers = delivery("issues", labeled())
    assert client.post("/webhook", data=body, headers=headers).status_code == 503


def test_github_out_of_reach_is_a_clear_error(settings, store):
    app, client = app_for(settings.replace(github_api_url="http://127.0.0.1:9/api/v3"), store)
    res = client.get(f"/setup/callback?code=abc&state={flow_of(app).issue()}")
    assert res.status_code == 502 and "cannot reach GitHub" in res.get_data(as_text=True)


def test_when_the_server_cannot_run_as_the_new_app_the_page_says_so_and_deliveries_wait(settings, store,
                                                                                           fake_github):
    def refuse(settings: Settings) -> None:
        raise ConfigError("SANDBOX_MODE=docker needs docker: install it")

    app, client = app_for(settings, store, on_configured=refuse)
    _, answer = created(fake_github, client, flow_of(app).key)
    page = answer.get_data(as_text=True)
    assert answer.status_code == 500 and "is saved" in page and "restart decode serve" in page
    assert load(settings.store.data_dir) is not None
    body, headers = delivery("issues", labeled(), secret=load(settings.store.data_dir).webhook_secret)
    assert client.post("/webhook", data=body, headers=headers).status_code == 503


def test_a_server_configured_by_its_environment_never_offers_the_form(settings, store, fake_github):
    env_settings = settings.replace(github_app_id=str(fake_github.app_id),
                                    github_app_private_key=fake_github.private_key_pem, github_webhook_secret=SECRET)
    app, client = app_for(env_settings, store)
    page = client.get("/setup", query_string={"key": flow_of(app).key}).get_data(as_text=True)
    assert f"GitHub App id {fake_github.app_id}" in page and "<form" not in page and "manifest" not in page
    res = client.get(f"/setup/callback?code=abc&state={flow_of(app).issue()}")
    assert res.status_code == 409 and not fake_github.calls("POST", "^/app-manifests/")
    assert not (settings.store.data_dir / "app.json").exists()


def test_the_setup_key_is_kept_owner_only_in_the_data_dir_until_the_app_is_saved(settings, store, fake_github):
    app, client = app_for(settings, store)
    key, path = flow_of(app).key, settings.store.data_dir / "setup.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert flow_of(app_for(settings, store)[0]).key == key  # the same data dir: the same key
    created(fake_github, client, key)
    assert not path.exists() and not flow_of(app).admits(key)


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_a_server_in_setup_mode_says_so_at_the_root_and_its_logged_link_outlives_a_restart(env, tmp_path):
    setup_env = {k: v for k, v in env.items() if not k.startswith("GITHUB_APP_") and k != "GITHUB_WEBHOOK_SECRET"}
    setup_env["DECODE_PUBLIC_URL"] = PUBLIC
    links = []
    for name in ("first", "second"):
        log = tmp_path / f"{name}.log"
        server = Server(setup_env, log)
        try:
            status, page = get(server.url + "/")
            assert status == 200 and "setup mode" in page and 'href="/setup"' in page, page
            link = setup_link(log.read_text())  # a plain line: the link is copied as it stands
            assert link.startswith(f"{PUBLIC}/setup?key=") and "\\" not in link
            status, form_page = get(server.url + link.removeprefix(PUBLIC))
            assert status == 200 and 'id="create"' in form_page, form_page
            links.append(link)
        finally:
            assert server.stop() == 0
    assert links[0] == links[1]
    assert stat.S_IMODE((tmp_path / "data" / "setup.key").stat().st_mode) == 0o600


@pytest.mark.parametrize("host, base", [("0.0.0.0", "http://127.0.0.1:{port}"), ("::", "http://[::1]:{port}"),
                                        ("::1", "http://[::1]:{port}")])
def test_without_a_public_url_the_log_says_what_to_set_and_its_link_opens_in_a_browser(env, tmp_path, host, base):
    """A wildcard bind (the container's 0.0.0.0) is linked at loopback, an IPv6 address in brackets; the line
    names the missing App settings and DECODE_PUBLIC_URL, and the page it links says the same."""
    setup_env = {k: v for k, v in env.items() if not k.startswith("GITHUB_APP_") and k != "GITHUB_WEBHOOK_SECRET"}
    log = tmp_path / "serve.log"
    server = Server(setup_env, log, host=host)
    try:
        [line] = [x for x in log.read_text().splitlines() if "setup mode" in x]
        assert "GITHUB_APP_ID" in line and "GITHUB_TOKEN" in line and "set DECODE_PUBLIC_URL" not in line
        assert "DECODE_PUBLIC_URL is not set: set it to the https address GitHub reaches" in line
        link = setup_link(line)
        assert link.startswith(base.format(port=server.port) + "/setup?key="), line
        status, page = get(link)
        assert status == 200 and 'id="no-public-url"' in page and "it stays good across the restart" in page, page
    finally:
        assert server.stop() == 0
