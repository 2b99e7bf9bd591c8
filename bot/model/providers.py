"""Who serves the model (`DECODE_PROVIDER`): the SDK client for it, and the words its errors use.

The provider changes how the client is built and nothing else: `AnthropicModel` keeps one retry policy,
one request shape and one reply shape for all three. Each provider is the anthropic SDK's own client,
given the values of the provider's own variables (`ModelSettings`, read once at start-up):

- `anthropic`: `anthropic.Anthropic` with ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL.
- `bedrock`: `anthropic.AnthropicBedrock` (the `bedrock` extra: boto3 signs each request with SigV4,
  https://docs.aws.amazon.com/bedrock/latest/userguide/inference-invoke.html) with AWS_REGION and
  AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, AWS_PROFILE, or AWS_BEARER_TOKEN_BEDROCK;
  without any of them, boto3's own chain (shared files, the instance role). Bedrock has no token counting
  and no Models API.
- `vertex`: `anthropic.AnthropicVertex` (the `vertex` extra: google-auth mints the bearer token,
  https://cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude) with CLOUD_ML_REGION,
  ANTHROPIC_VERTEX_PROJECT_ID and GOOGLE_APPLICATION_CREDENTIALS (else Application Default Credentials).
  Vertex counts tokens but has no Models API.

Missing configuration is a `ConfigError` naming the variable to set, before any request.
"""

from __future__ import annotations

import importlib.util
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx2

from bot.config import ModelSettings
from bot.core.errors import ConfigError
from bot.core.extras import missing_extra

DEFAULT_BASE_URL = "https://api.anthropic.com"
CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
AWS_CREDENTIALS = ("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_SESSION_TOKEN, AWS_PROFILE, "
                   "AWS_BEARER_TOKEN_BEDROCK)")


@dataclass(frozen=True)
class Provider:
    """One provider's client and how errors name it: `api` ("Amazon Bedrock"), where it is (`base_url`,
    set by `base_url_var`), the variables holding its `credentials`; whether it has token counting
    (`counts_tokens`) and the Models API (`models_api`); the exceptions its credential lookup raises
    outside the SDK's own errors (`auth_errors`: boto3's, google-auth's)."""

    name: str
    client: Any
    api: str
    base_url: str
    base_url_var: str
    credentials: str
    counts_tokens: bool = True
    models_api: bool = True
    auth_errors: tuple[type[BaseException], ...] = ()


def connect(model: ModelSettings, timeout: httpx2.Timeout) -> Provider:
    """The client for `model.provider`, its retries off (`AnthropicModel` owns them); a `ConfigError` naming
    what to set when the provider's configuration is incomplete."""
    return CONNECT[model.provider](model, timeout)


def _anthropic(model: ModelSettings, timeout: httpx2.Timeout) -> Provider:
    if not model.api_key:
        raise ConfigError("ANTHROPIC_API_KEY is not set: set it to an Anthropic API key "
                          "(or DECODE_PROVIDER=bedrock|vertex, or DECODE_MODEL=scripted:FILE to replay a session)")
    base_url = model.base_url or DEFAULT_BASE_URL
    # base_url is always passed, so the SDK never falls back to reading the environment.
    client = anthropic.Anthropic(api_key=model.api_key, base_url=base_url, max_retries=0, timeout=timeout)
    return Provider("anthropic", client, "the Anthropic API", base_url, "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY")


def _bedrock(model: ModelSettings, timeout: httpx2.Timeout) -> Provider:
    _need("bedrock", "boto3", "boto3")
    import boto3
    import botocore.exceptions

    keys = {"AWS_ACCESS_KEY_ID": model.aws_access_key_id, "AWS_SECRET_ACCESS_KEY": model.aws_secret_access_key}
    if model.aws_bearer_token and (any(keys.values()) or model.aws_profile):
        raise ConfigError("DECODE_PROVIDER=bedrock: set AWS_BEARER_TOKEN_BEDROCK or AWS credentials "
                          "(AWS_ACCESS_KEY_ID, AWS_PROFILE), not both")
    missing = [name for name, value in keys.items() if not value]
    if len(missing) == 1:
        raise ConfigError(f"DECODE_PROVIDER=bedrock: {missing[0]} is not set: AWS_ACCESS_KEY_ID and "
                          "AWS_SECRET_ACCESS_KEY go together")
    try:
        session = boto3.Session(profile_name=model.aws_profile, region_name=model.aws_region)
        region = session.region_name
        found = model.aws_bearer_token or not missing or session.get_credentials() is not None
    except botocore.exceptions.BotoCoreError as e:
        raise ConfigError(f"DECODE_PROVIDER=bedrock: the AWS configuration cannot be read ({e}): check "
                          "AWS_PROFILE") from None
    if not region:
        raise ConfigError("DECODE_PROVIDER=bedrock: no AWS region: set AWS_REGION (e.g. us-east-1)")
    if not found:
        raise ConfigError(f"DECODE_PROVIDER=bedrock: no AWS credentials were found: set {AWS_CREDENTIALS}")
    client = anthropic.AnthropicBedrock(
        aws_access_key=model.aws_access_key_id, aws_secret_key=model.aws_secret_access_key,
        aws_session_token=model.aws_session_token, aws_profile=model.aws_profile, aws_region=region,
        api_key=model.aws_bearer_token, base_url=model.bedrock_base_url, max_retries=0, timeout=timeout)
    return Provider("bedrock", client, "Amazon Bedrock", str(client.base_url).rstrip("/"),
                    "ANTHROPIC_BEDROCK_BASE_URL", AWS_CREDENTIALS, counts_tokens=False, models_api=False,
                    auth_errors=(botocore.exceptions.BotoCoreError,))


def _vertex(model: ModelSettings, timeout: httpx2.Timeout) -> Provider:
    _need("vertex", "google.auth", "google-auth")
    import google.auth
    import google.auth.exceptions

    if not model.vertex_region:
        raise ConfigError("DECODE_PROVIDER=vertex: CLOUD_ML_REGION is not set: set it to the Vertex AI region "
                          "of the model (e.g. us-east5, europe-west1 or global)")
    credentials, project = None, model.vertex_project_id
    if model.google_credentials is not None:
        try:  # as google.auth.default() loads this variable's file: any credential type, the warning off
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                credentials, in_file = google.auth.load_credentials_from_file(str(model.google_credentials),
                                                                              scopes=[CLOUD_PLATFORM])
        except google.auth.exceptions.GoogleAuthError as e:
            raise ConfigError(f"GOOGLE_APPLICATION_CREDENTIALS={model.google_credentials}: not a usable "
                              f"credentials file ({reason(e)})") from None
        project = project or in_file
    if not project:
        raise ConfigError("DECODE_PROVIDER=vertex: ANTHROPIC_VERTEX_PROJECT_ID is not set: set it to the Google "
                          "Cloud project that has Claude enabled in Vertex AI")
    client = anthropic.AnthropicVertex(region=model.vertex_region, project_id=project, credentials=credentials,
                                       base_url=model.vertex_base_url, max_retries=0, timeout=timeout)
    where = ("GOOGLE_APPLICATION_CREDENTIALS" if credentials is not None
             else "the Application Default Credentials (or set GOOGLE_APPLICATION_CREDENTIALS)")
    return Provider("vertex", client, "Vertex AI", str(client.base_url).rstrip("/"), "ANTHROPIC_VERTEX_BASE_URL",
                    f"{where}, ANTHROPIC_VERTEX_PROJECT_ID and CLOUD_ML_REGION", models_api=False,
                    auth_errors=(google.auth.exceptions.GoogleAuthError,))


def reason(error: BaseException) -> str:
    """The first line of what a boto3 or google-auth error says (google-auth's carry a tuple of details)."""
    first = error.args[0] if error.args else error
    return (str(first).splitlines() or [type(error).__name__])[0]


def _need(extra: str, module: str, package: str) -> None:
    """A one-line `ConfigError` naming the extra to install when `module` (the extra's library) is missing."""
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        found = False
    if not found:
        raise missing_extra(extra, f"DECODE_PROVIDER={extra}", package)


CONNECT: dict[str, Callable[[ModelSettings, httpx2.Timeout], Provider]] = {
    "anthropic": _anthropic, "bedrock": _bedrock, "vertex": _vertex}
