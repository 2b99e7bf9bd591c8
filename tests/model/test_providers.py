"""DECODE_PROVIDER=bedrock and =vertex: the SDK's own clients, with the providers' own credentials, against
fakes of Bedrock's runtime (SigV4 verified) and Vertex AI (a token minted from a service account key), with
the one retry policy and the one reply shape of the Anthropic API; and provider model ids priced by family."""

from __future__ import annotations

import json
import traceback

import pytest

from bot.config import Settings
from bot.core.errors import ConfigError, DecodeError
from bot.model import make_model
from bot.model.anthropic import AnthropicModel
from bot.model.pricing import cost_usd, price_for
from bot.model.protocol import Usage

BEDROCK_ID = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
VERTEX_ID = "claude-sonnet-4-5@20250929"
HELLO = [[{"type": "text", "text": "hello from the provider"}]]


def ask(model: AnthropicModel) -> str:
    return model.complete(system="be brief", messages=[{"role": "user", "content": "hi"}], tools=[],
                          max_tokens=64).text


@pytest.fixture
def sleeps() -> list[float]:
    return []


def bedrock(fake, sleeps: list[float], **env: str) -> AnthropicModel:
    settings = Settings.from_env({**fake.env(), "DECODE_MODEL": BEDROCK_ID, **env})
    return AnthropicModel(settings.model, sleep=sleeps.append)


def test_bedrock_preflight_is_a_signed_one_token_message_and_runs_answer(fake_bedrock, fake_anthropic, sleeps):
    fake_anthropic.script(HELLO, by_position=True)
    model = bedrock(fake_bedrock, sleeps)
    model.check()
    assert ask(model) == "hello from the provider"
    ping, turn = fake_bedrock.requests  # the one-token preflight is not streamed; answers are
    assert (ping.path, turn.path) == (f"/model/{BEDROCK_ID}/invoke", f"/model/{BEDROCK_ID}/invoke-with-response-stream")
    sent = json.loads(ping.body)
    assert sent["max_tokens"] == 1 and "model" not in sent and sent["anthropic_version"]
    assert all(r.headers["authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={fake_bedrock.access_key}/")
               for r in (ping, turn))
    assert fake_anthropic.token_counts == [] and "x-api-key" not in turn.headers  # no token counting on Bedrock
    assert model.provider.models_api is False and model.base_url == fake_bedrock.url


def test_bedrock_with_a_wrong_secret_is_refused_once_naming_the_aws_variables(fake_bedrock, fake_anthropic, sleeps):
    wrong = "wrong/secret/0000000000000000000000000000"
    model = bedrock(fake_bedrock, sleeps, AWS_SECRET_ACCESS_KEY=wrong)
    with pytest.raises(ConfigError) as caught:
        model.check()
    message = str(caught.value)
    assert message.startswith("Amazon Bedrock refused the credentials (403 error: The request signature we "
                              "calculated does not match"), message
    assert "check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY" in message and "\n" not in message
    assert wrong not in "".join(traceback.format_exception(caught.value))
    assert len(fake_bedrock.requests) == 1 and sleeps == [] and fake_anthropic.requests == []
    with pytest.raises(DecodeError, match="check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"):
        ask(model)  # mid-run, the same hint


def test_bedrock_overload_is_retried_by_the_one_retry_policy(fake_bedrock, fake_anthropic, sleeps):
    fake_anthropic.script(HELLO).inject(529, times=2)
    assert ask(bedrock(fake_bedrock, sleeps)) == "hello from the provider"
    assert len(sleeps) == 2 and [r.status for r in fake_anthropic.requests] == [529, 529, 200]


@pytest.mark.parametrize(("error_type", "exception", "retried"), [
    ("overloaded_error", "serviceUnavailableException", True), ("rate_limit_error", "throttlingException", True),
    ("api_error", "internalServerException", True), ("timeout_error", "modelStreamErrorException", True),
    ("invalid_request_error", "validationException", False)])
def test_a_bedrock_stream_that_fails_mid_answer_is_retried_if_transient(fake_bedrock, fake_anthropic, sleeps, caplog,
                                                                       error_type, exception, retried):
    fake_anthropic.script(HELLO).inject(500, mid_stream=True, error_type=error_type)
    model = bedrock(fake_bedrock, sleeps)
    if retried:
        assert ask(model) == "hello from the provider"
        assert len(sleeps) == 1 and [r.status for r in fake_anthropic.requests] == [200, 200]
        assert f"Amazon Bedrock failed mid-answer with {exception}: " in caplog.text
    else:
        with pytest.raises(DecodeError, match=rf"^Amazon Bedrock at \S+ failed mid-answer with {exception}: "):
            ask(model)
        assert sleeps == [] and fake_anthropic.remaining == 1
    assert all(r.path.endswith("/invoke-with-response-stream") for r in fake_bedrock.requests)


def test_vertex_streams_and_retries_an_overload_mid_answer(fake_vertex, fake_anthropic, tmp_path, sleeps):
    fake_anthropic.script(HELLO).inject(529, mid_stream=True)
    settings = Settings.from_env({**fake_vertex.env(fake_vertex.key_file(tmp_path / "sa.json")),
                                  "DECODE_MODEL": VERTEX_ID})
    assert ask(AnthropicModel(settings.model, sleep=sleeps.append)) == "hello from the provider"
    assert len(sleeps) == 1 and [r.status for r in fake_anthropic.requests] == [200, 200]
    assert all(r.path.endswith(f"/{VERTEX_ID}:streamRawPredict") for r in fake_vertex.requests)


def test_a_model_bedrock_does_not_serve_is_named_at_the_preflight(fake_bedrock, fake_anthropic, sleeps):
    fake_anthropic.models = {BEDROCK_ID}
    model = bedrock(fake_bedrock, sleeps, DECODE_MODEL="us.anthropic.claude-nope-v1:0")
    with pytest.raises(DecodeError, match=r"^DECODE_MODEL=us.anthropic.claude-nope-v1:0 is not a model these "
                                          r"credentials can use on Amazon Bedrock: "):
        model.check()
    assert sleeps == []


def test_bedrock_with_one_half_of_a_key_pair_says_which_is_missing(fake_bedrock):
    env = {**fake_bedrock.env(), "AWS_SECRET_ACCESS_KEY": ""}
    with pytest.raises(ConfigError, match="^DECODE_PROVIDER=bedrock: AWS_SECRET_ACCESS_KEY is not set: "):
        make_model(Settings.from_env(env).model)


def test_vertex_counts_tokens_with_a_token_minted_from_the_service_account(fake_vertex, fake_anthropic,
                                                                           tmp_path, sleeps):
    fake_anthropic.script(HELLO)
    settings = Settings.from_env({**fake_vertex.env(fake_vertex.key_file(tmp_path / "sa.json")),
                                  "DECODE_MODEL": VERTEX_ID})
    model = AnthropicModel(settings.model, sleep=sleeps.append)
    model.check()
    assert ask(model) == "hello from the provider"
    count, turn = fake_vertex.requests
    where = f"/v1/projects/{fake_vertex.project}/locations/{fake_vertex.region}/publishers/anthropic/models"
    assert (count.path, turn.path) == (f"{where}/count-tokens:rawPredict", f"{where}/{VERTEX_ID}:streamRawPredict")
    assert "model" not in json.loads(turn.body) and len(fake_anthropic.token_counts) == 1
    assert len(fake_vertex.token_requests) == 1  # one token, reused
    assert model.provider.models_api is False


def test_vertex_names_the_variable_its_configuration_lacks(fake_vertex, tmp_path):
    key = fake_vertex.key_file(tmp_path / "sa.json", project="")
    env = fake_vertex.env(key)
    with pytest.raises(ConfigError, match="^DECODE_PROVIDER=vertex: ANTHROPIC_VERTEX_PROJECT_ID is not set: "):
        make_model(Settings.from_env(env).model)
    with pytest.raises(ConfigError, match="^DECODE_PROVIDER=vertex: CLOUD_ML_REGION is not set: "):
        make_model(Settings.from_env({**env, "CLOUD_ML_REGION": ""}).model)
    (tmp_path / "not.json").write_text("not a key")
    with pytest.raises(ConfigError, match=r"^GOOGLE_APPLICATION_CREDENTIALS=\S+not.json: not a usable credentials"):
        make_model(Settings.from_env({**env, "GOOGLE_APPLICATION_CREDENTIALS": str(tmp_path / "not.json")}).model)


def test_vertex_refusals_name_the_google_variables(fake_vertex, fake_anthropic, tmp_path, sleeps):
    env = {**fake_vertex.env(fake_vertex.key_file(tmp_path / "sa.json")), "DECODE_MODEL": VERTEX_ID}
    other = AnthropicModel(Settings.from_env({**env, "ANTHROPIC_VERTEX_PROJECT_ID": "elsewhere"}).model)
    with pytest.raises(ConfigError, match=r"^Vertex AI refused the credentials \(403 error: Permission "):
        other.check()
    stranger = type(fake_vertex)(fake_anthropic).start()  # another key: the token endpoint refuses its JWT
    try:
        foreign = stranger.key_file(tmp_path / "foreign.json")
        foreign.write_text(foreign.read_text().replace(stranger.url, fake_vertex.url))
        model = AnthropicModel(Settings.from_env({**env, "GOOGLE_APPLICATION_CREDENTIALS": str(foreign)}).model)
        with pytest.raises(ConfigError) as caught:
            model.check()
    finally:
        stranger.stop()
    assert str(caught.value).startswith("Vertex AI: the credentials could not be obtained (invalid_grant: ")
    assert "check GOOGLE_APPLICATION_CREDENTIALS" in str(caught.value)
    assert len(fake_vertex.requests) == 1  # only the other project's: no token, no request


def test_bedrock_and_vertex_have_no_models_api_so_info_is_the_built_in_figures(fake_bedrock, fake_vertex,
                                                                               fake_anthropic, tmp_path, sleeps):
    on_vertex = AnthropicModel(Settings.from_env({**fake_vertex.env(fake_vertex.key_file(tmp_path / "sa.json")),
                                                  "DECODE_MODEL": "claude-opus-4-1@20250805"}).model)
    for model in (bedrock(fake_bedrock, sleeps, DECODE_MODEL="us.anthropic.claude-opus-4-1-20250805-v1:0"),
                  on_vertex):
        info = model.info()
        assert (info.source, info.window, info.max_output, info.thinking) == ("built-in", 200_000, 32_000, True)
    assert fake_bedrock.requests == fake_vertex.requests == fake_anthropic.model_lookups == []


def test_an_unknown_provider_is_one_line_naming_the_choices():
    with pytest.raises(ConfigError, match=r"^DECODE_PROVIDER='azure' is not valid: set it to one of anthropic, "
                                          r"bedrock, vertex$"):
        Settings.from_env({"DECODE_PROVIDER": "azure"})


@pytest.mark.parametrize(("model", "family"), [
    ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"),
    ("global.anthropic.claude-opus-4-1-20250805-v1:0", "claude-opus-4-1"),
    ("anthropic.claude-haiku-4-5-20251001-v1:0", "claude-haiku-4-5"),
    ("arn:aws:bedrock:us-east-1:123456789012:inference-profile/eu.anthropic.claude-opus-4-0-20250514-v1:0",
     "claude-opus-4-0"),
    ("claude-sonnet-4-5@20250929", "claude-sonnet-4-5"),
    ("claude-opus-4-1@20250805", "claude-opus-4-1"),
    ("claude-haiku-4-5@20251001", "claude-haiku-4-5"),
])
def test_provider_model_ids_are_priced_as_the_model_they_serve(model, family):
    assert price_for(model) == price_for(family)
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    assert cost_usd(model, usage) == cost_usd(family, usage)
    assert price_for("claude-opus-4-1@20250805")["input"] == 15.0 != price_for("claude-opus-4-5@20251101")["input"]
