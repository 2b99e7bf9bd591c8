"""The redactor: configured secrets (raw and base64) and known token shapes never survive."""

from __future__ import annotations

import base64
import json
import time

import pytest

from bot.config import Settings
from bot.core.redact import Redactor, credential_values

GH_TOKEN = "ghs_" + "16C7e42F292c6912E7710c838347Ae178B4a"
API_KEY = "sk-ant-api03-" + "Xy9_" * 20 + "AA"
WEBHOOK_SECRET = "webhook-secret-value-1234"
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEAtM8ZfakeFAKEfake0123456789abcdefghijABCDEFGHIJklmn\n"
    "opqrstuvwxyzOPQRSTUVWXYZ0123456789+/fakeFAKEfakeFAKEfakeFAKEfake12\n"
    "-----END RSA PRIVATE KEY-----"
)


@pytest.fixture
def redactor() -> Redactor:
    settings = Settings.from_env(
        {"GITHUB_TOKEN": GH_TOKEN, "ANTHROPIC_API_KEY": API_KEY, "GITHUB_WEBHOOK_SECRET": WEBHOOK_SECRET,
         "GITHUB_APP_PRIVATE_KEY": PEM}
    )
    return Redactor(settings.secrets())


def test_configured_values_are_replaced(redactor: Redactor) -> None:
    text = f"token={GH_TOKEN} key={API_KEY} secret: {WEBHOOK_SECRET}!"
    out = redactor.redact(text)
    for secret in (GH_TOKEN, API_KEY, WEBHOOK_SECRET):
        assert secret not in out
    assert out.startswith("token=[REDACTED:") and out.endswith("!")


@pytest.mark.parametrize("prefix", ["", "x", "xy", "x-access-token:", "git:"])
@pytest.mark.parametrize("suffix", ["", "z", "zz", "\n"])
def test_base64_forms_are_replaced_at_any_alignment(redactor: Redactor, prefix: str, suffix: str) -> None:
    encoded = base64.b64encode(f"{prefix}{WEBHOOK_SECRET}{suffix}".encode()).decode()
    out = redactor.redact(f"header: {encoded}")
    assert "[REDACTED:secret]" in out
    left = out.removeprefix("header: ").replace("[REDACTED:secret]", "")
    assert len(left) <= len(base64.b64encode(f"{prefix}{suffix}".encode())) + 4  # only the neighbours remain


def test_git_basic_auth_header_is_replaced(redactor: Redactor) -> None:
    value = base64.b64encode(f"x-access-token:{GH_TOKEN}".encode()).decode()
    out = redactor.redact(f"> Authorization: Basic {value}\n")
    assert value not in out and "REDACTED" in out and out.startswith("> Authorization: Basic ")


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("ghp_" + "a" * 36, "github-token"),
        ("gho_" + "B" * 36, "github-token"),
        ("ghu_" + "c1" * 18, "github-token"),
        ("ghs_" + "D2" * 18, "github-token"),
        ("ghr_" + "e3" * 18, "github-token"),
        ("github_pat_11ABCDEFG0123456789_" + "x" * 59, "github-token"),
        ("sk-ant-api03-" + "k" * 90 + "-AA", "anthropic-key"),
        ("eyJhbGciOiJSUzI1NiJ9.eyJpYXQiOjE3MDAwMDAwMDAsImlzcyI6IjEyMyJ9.c2lnbmF0dXJlc2lnbmF0dXJl", "jwt"),
        ("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----", "private-key"),
        ("-----BEGIN OPENSSH PRIVATE KEY-----\\nb3BlbnNzaC1rZXktdjE=\\n-----END OPENSSH PRIVATE KEY-----",
         "private-key"),
    ],
)
def test_known_shapes_are_replaced_without_configuration(text: str, kind: str) -> None:
    out = Redactor().redact(f"before {text} after")
    assert out == f"before [REDACTED:{kind}] after"


def test_truncated_private_key_is_hidden_to_the_end_of_its_body() -> None:
    text = "key:\n-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg4LVWM9nuwNSk3yBYB\n[... 900 bytes dropped"
    out = Redactor().redact(text)
    assert out.startswith("key:\n[REDACTED:private-key]") and "MHcCAQ" not in out


def test_credentials_in_urls_and_headers() -> None:
    r = Redactor()
    assert r.redact("https://user:hunter2hunter2@example.com/x.git") == (
        "https://user:[REDACTED:url-credentials]@example.com/x.git"
    )
    assert r.redact('"Authorization": "Bearer abcdefgh12345678"') == '"Authorization": "Bearer [REDACTED:auth-header]"'
    assert r.redact("authorization: token 0123456789abcdef") == "authorization: token [REDACTED:auth-header]"


def test_short_and_missing_values_are_ignored() -> None:
    r = Redactor(["", None, "abc", "  x  "])
    text = "abc is a word; so is x"
    assert r.redact(text) == text


def test_ordinary_text_is_untouched() -> None:
    text = "def ghp_helper(): return 'sk-ant' + eyJ  # github_pat_ prefix alone\nhttps://example.com/a:b"
    assert Redactor(["unrelated-secret-123"]).redact(text) == text


def test_redaction_is_idempotent(redactor: Redactor) -> None:
    basic = base64.b64encode(b"a:" + API_KEY.encode()).decode()
    text = f"{GH_TOKEN} {PEM} https://u:{WEBHOOK_SECRET}@h/ Authorization: Basic {basic}"
    once = redactor.redact(text)
    assert redactor.redact(once) == once


def test_pem_lines_leaking_one_by_one(redactor: Redactor) -> None:
    line = PEM.splitlines()[1]
    assert line not in redactor.redact(f"cat key | head -2\n{line}\n")


def test_redact_obj_walks_nested_data(redactor: Redactor) -> None:
    obj = {"a": [GH_TOKEN, {"b": (1, f"x {API_KEY}")}], GH_TOKEN: None, "n": 3, "f": 1.5, "t": True}
    out = redactor.redact_obj(obj)
    assert GH_TOKEN not in json.dumps(out) and API_KEY not in json.dumps(out)
    assert out["n"] == 3 and out["f"] == 1.5 and out["t"] is True and out["a"][1]["b"][0] == 1
    assert obj["a"][0] == GH_TOKEN  # the input is not modified


def test_contains_secret(redactor: Redactor) -> None:
    assert redactor.contains_secret(b"+token = '" + GH_TOKEN.encode() + b"'")
    assert redactor.contains_secret(base64.b64encode(WEBHOOK_SECRET.encode()).decode())
    assert not redactor.contains_secret(b"+print('hello')")


def test_megabytes_of_transcript_are_fast(redactor: Redactor) -> None:
    chunk = "".join(f"line {i}: some ordinary tool output with paths/like/this.py and eyJ-ish words\n"
                    for i in range(1000))
    text = (chunk * 50)[: 4 * 1024 * 1024] + GH_TOKEN
    started = time.perf_counter()
    out = redactor.redact(text)
    elapsed = time.perf_counter() - started
    assert out.endswith("[REDACTED:secret]")
    assert elapsed < 2.0, f"{elapsed:.2f}s for 4 MB"


def test_a_job_adds_its_token_to_the_process_redactor_without_changing_it():
    settings = Settings(anthropic_api_key="sk-process-secret-123456")
    job = settings.redactor.plus("job-token-abcdef123456")
    text = "key sk-process-secret-123456 token job-token-abcdef123456"
    assert job.redact(text) == "key [REDACTED:secret] token [REDACTED:secret]"
    assert "job-token-abcdef123456" in settings.redactor.redact(text)  # the next job's redactor starts clean
    assert settings.redactor is settings.redactor  # built once per settings value


def test_a_credentials_files_values_are_redacted_one_by_one_but_not_its_short_or_public_ones():
    ini = "[default]\nregion = eu-west-1\naws_secret_access_key = wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY\n"
    key = json.dumps({"type": "service_account", "private_key_id": "0123456789abcdef0123",
                      "token_uri": "https://oauth2.googleapis.com/token"})
    redact = Redactor([*credential_values(ini), *credential_values(key)]).redact
    assert redact("v: wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY") == "v: [REDACTED:secret]"
    assert redact("id 0123456789abcdef0123") == "id [REDACTED:secret]"
    assert redact("region eu-west-1 via https://oauth2.googleapis.com/token") == \
        "region eu-west-1 via https://oauth2.googleapis.com/token"
