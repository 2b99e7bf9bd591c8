"""The App /setup keeps in DECODE_DATA_DIR/app.json: owner-only, written whole, and never over the environment's."""

from __future__ import annotations

import json
import stat

import pytest

from bot.github.app_credentials import StoredApp, load, save, with_stored_app
from bot.config import Settings
from bot.core.errors import ConfigError

APP = StoredApp(id=31337, slug="decode-bot-acme", html_url="https://github.com/apps/decode-bot-acme",
                client_id="Iv23abc", pem="-----BEGIN RSA PRIVATE KEY-----\nkey\n-----END RSA PRIVATE KEY-----\n",
                webhook_secret="whsec-from-github", client_secret="client-secret-from-github")


def test_the_app_is_saved_owner_only_and_read_back_whole(tmp_path):
    data = tmp_path / "data"
    path = save(data, APP)
    assert path == data / "app.json" and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in data.iterdir()] == ["app.json"]  # the temporary file was renamed, not left
    assert load(data) == APP
    assert json.loads(path.read_text())["webhook_secret"] == "whsec-from-github"


def test_saving_again_replaces_the_file_and_keeps_it_owner_only(tmp_path):
    save(tmp_path, APP)
    (tmp_path / "app.json").chmod(0o644)
    newer = StoredApp(**{**APP.__dict__, "id": 1})
    save(tmp_path, newer)
    assert load(tmp_path) == newer and stat.S_IMODE((tmp_path / "app.json").stat().st_mode) == 0o600


def test_no_secret_shows_in_the_apps_repr():
    text = repr(APP)
    assert "decode-bot-acme" in text
    assert not any(secret in text for secret in (APP.pem, APP.webhook_secret, APP.client_secret))


def test_without_a_file_the_settings_stay_as_they_are(tmp_path):
    github = Settings(data_dir=tmp_path).github
    assert load(tmp_path) is None and with_stored_app(github, tmp_path) == github


def test_the_file_fills_every_app_credential_when_the_environment_sets_none(tmp_path):
    save(tmp_path, APP)
    settings = Settings(data_dir=tmp_path, github_token="ghp_token")
    github = with_stored_app(settings.github, tmp_path)
    assert (github.app_id, github.app_private_key, github.webhook_secret) == ("31337", APP.pem, APP.webhook_secret)
    assert (github.client_id, github.client_secret) == (APP.client_id, APP.client_secret)
    served = settings.replace(github=github)  # as `decode serve` runs
    assert APP.webhook_secret in served.secrets() and APP.client_secret in served.secrets()


@pytest.mark.parametrize("env", [
    {"GITHUB_APP_ID": "7", "GITHUB_APP_PRIVATE_KEY": "-----BEGIN PRIVATE KEY-----x", "GITHUB_WEBHOOK_SECRET": "s"},
    {"GITHUB_WEBHOOK_SECRET": "env-secret"},  # partly set: the environment's own error says what is missing
    {"GITHUB_APP_ID": "7"},
], ids=["all three", "only the secret", "only the id"])
def test_the_environment_wins_and_is_never_mixed_with_the_file(tmp_path, env):
    save(tmp_path, APP)
    settings = Settings.from_env({**env, "DECODE_DATA_DIR": str(tmp_path)})
    assert with_stored_app(settings.github, tmp_path) == settings.github


def test_an_oauth_client_from_the_environment_is_kept_as_a_pair(tmp_path):
    save(tmp_path, APP)
    github = with_stored_app(Settings(data_dir=tmp_path, github_client_id="Iv23env").github, tmp_path)
    assert github.app_id == "31337"
    assert (github.client_id, github.client_secret) == ("Iv23env", None)


@pytest.mark.parametrize("text", ["{not json", "[]", json.dumps({**APP.__dict__, "pem": ""}),
                                  json.dumps({**APP.__dict__, "id": "31337"})])
def test_a_damaged_file_is_an_error_naming_it_and_what_to_do(tmp_path, text):
    (tmp_path / "app.json").write_text(text)
    with pytest.raises(ConfigError, match=r"app\.json is not a GitHub App saved by /setup .*delete the file") as e:
        with_stored_app(Settings(data_dir=tmp_path).github, tmp_path)
    assert "BEGIN RSA" not in str(e.value)
