"""The server's model check (`decode serve`, `decode worker`) with DECODE_PROVIDER=bedrock and =vertex: a
provider needs no ANTHROPIC_API_KEY; its check asks the provider (jobs run when it answers) and, while its
configuration is incomplete or its credentials refused, holds the jobs naming the provider's variables."""

from __future__ import annotations

from bot.config import Settings
from bot.model import shared_model
from bot.server.health import model_check

BEDROCK_ID = "anthropic.claude-haiku-4-5-20251001-v1:0"


def test_bedrock_answers_the_check_without_an_anthropic_key(fake_bedrock, fake_anthropic):
    fake_anthropic.script([[{"type": "text", "text": "pong"}]], by_position=True)
    settings = Settings.from_env({**fake_bedrock.env(), "DECODE_MODEL": BEDROCK_ID})
    model = shared_model(settings.model)
    assert model is not None and settings.model.api_key is None
    assert model_check(settings.model, model, settings.web.health_recheck_s).now() is None
    assert [r.path for r in fake_bedrock.requests] == [f"/model/{BEDROCK_ID}/invoke"]


def test_refused_aws_credentials_hold_the_jobs_naming_the_aws_variables(fake_bedrock):
    settings = Settings.from_env({**fake_bedrock.env(), "AWS_SECRET_ACCESS_KEY": "not/the/secret/000000000000"})
    error = model_check(settings.model, shared_model(settings.model), settings.web.health_recheck_s).now()
    assert error is not None and "check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY" in str(error)
    assert "not/the/secret" not in str(error)


def test_an_incomplete_vertex_configuration_holds_the_jobs_naming_the_variable(fake_vertex, tmp_path):
    settings = Settings.from_env({**fake_vertex.env(fake_vertex.key_file(tmp_path / "sa.json")),
                                  "CLOUD_ML_REGION": ""})
    assert shared_model(settings.model) is None
    error = model_check(settings.model, None, settings.web.health_recheck_s).now()
    assert str(error).startswith("DECODE_PROVIDER=vertex: CLOUD_ML_REGION is not set: ")
    assert fake_vertex.requests == [] and fake_vertex.token_requests == []
