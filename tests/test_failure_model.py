"""One failure model (issue 11), on the boundaries: the model preflight names a rejected key or an unknown model
id, and the repository preflight retries a 502 and names a rejected token. Each input walked through the real
entry points (CLI, Action, worker) is a row of tests/test_entry_points.py."""

from __future__ import annotations

import pytest

from bot.config import DEFAULT_MODEL
from bot.core.errors import DecodeError
from bot.github.auth import TokenCredentials
from bot.github.forge import GitHubForge
from bot.github.retry import GitHubRetry
from bot.model.anthropic import AnthropicModel
from tests.support.cli import EXAMPLE

OWNER, NAME, REPO = "octo", "calendar", "octo/calendar"
FILES = {p.name: p.read_text() for p in (EXAMPLE / "repo").iterdir()}
WRONG_KEY = "sk-ant-wrong-key-0000000000"
REJECTED = "ANTHROPIC_API_KEY was rejected (401 authentication_error): set a valid key"


# -- the preflight, on the model boundary -------------------------------------------------------------------

def test_the_preflight_names_a_rejected_key_and_an_unknown_model(fake_anthropic):
    with pytest.raises(DecodeError) as wrong:
        AnthropicModel(fake_anthropic.settings(anthropic_api_key=WRONG_KEY).model).check()
    assert str(wrong.value) == REJECTED
    fake_anthropic.models = {DEFAULT_MODEL}
    with pytest.raises(DecodeError) as unknown:
        AnthropicModel(fake_anthropic.settings(model="claude-nope-1").model).check()
    assert str(unknown.value) == "DECODE_MODEL=claude-nope-1 is not a model this key can use: model: claude-nope-1"
    AnthropicModel(fake_anthropic.settings().model).check()  # a good key and model pass
    assert [r.status for r in fake_anthropic.token_counts] == [401, 404, 200] and not fake_anthropic.requests


# -- the GitHub side of the preflight ----------------------------------------------------------------------------

def test_the_repository_preflight_retries_a_502_and_names_a_rejected_token(fake_github):
    fake_github.add_repo(OWNER, NAME, FILES)
    fake_github.inject("GET", rf"^/repos/{OWNER}/{NAME}$", status=502)
    sleeps: list[float] = []
    forge = GitHubForge(TokenCredentials(fake_github.token, fake_github.api_url),
                        retry=GitHubRetry(sleep=sleeps.append))
    assert forge.repository(REPO).full_name == REPO and len(sleeps) == 1
    wrong = GitHubForge(TokenCredentials("ghp_" + "x" * 36, fake_github.api_url),
                        retry=GitHubRetry(sleep=sleeps.append))
    with pytest.raises(DecodeError) as refused:
        wrong.repository(REPO)
    assert str(refused.value).startswith("the GitHub token was rejected") and "GITHUB_TOKEN" in str(refused.value)
    with pytest.raises(DecodeError) as missing:
        forge.repository("octo/nowhere")
    assert "octo/nowhere cannot be read with this token (404" in str(missing.value)
