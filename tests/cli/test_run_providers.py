"""`decode run` with DECODE_PROVIDER=bedrock and =vertex, through the real console script, against the fake
Bedrock runtime and the fake Vertex AI: a run ends in a commit without ANTHROPIC_API_KEY; a configuration
that cannot work is one line naming the variable to set (exit 2), before any request, without a traceback
or a secret."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import git
from tests.support.cli import DECODE, EXAMPLE, buggy_repo, printed  # noqa: F401 (a fixture)

NOTE = [[{"type": "tool_use", "name": "bash", "input": {"command": "echo checked > NOTES.md"}}],
        [{"type": "text", "text": "Took a note."}]]
TASK = "Check the weekend rule"
WRONG_SECRET = "wrong/Secret/Key/0000000000000000000000000"


def decode(tmp_path: Path, repo: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """`decode run --repo REPO TASK` as a user runs it, with only `env` (no ANTHROPIC_API_KEY)."""
    full_env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), "SANDBOX_MODE": "local",
                "DECODE_DATA_DIR": str(tmp_path / "data"), "PYTHONPATH": str(EXAMPLE.parents[1]), **env}
    return subprocess.run([DECODE, "run", "--repo", str(repo), TASK], env=full_env, capture_output=True, text=True,
                          timeout=240)


def committed(res: subprocess.CompletedProcess, repo: Path) -> None:
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    assert git(repo, "show", f"{printed(res.stdout, 'branch')}:NOTES.md") == "checked"


def thought_back(fake_anthropic) -> bool:
    """Whether the last turn sent back the first answer's streamed thinking block, signature and all (the fake
    refuses a continuation whose signature does not match)."""
    assistant = fake_anthropic.requests[-1].body["messages"][-2]["content"]
    return assistant[0]["type"] == "thinking" and bool(assistant[0]["signature"])


def test_a_run_on_bedrock_ends_in_a_commit(fake_bedrock, fake_anthropic, buggy_repo, tmp_path):
    fake_anthropic.script(NOTE, by_position=True)  # the preflight's one-token message is a turn at position 0
    fake_anthropic.thinking = {"enabled"}  # as Sonnet 4.5 has: the run thinks, its answers stream as event frames
    res = decode(tmp_path, buggy_repo, {**fake_bedrock.env(), "DECODE_MODEL": "us.anthropic.claude-sonnet-4-5-v1:0"})
    committed(res, buggy_repo)
    assert len(fake_bedrock.requests) == 3 and all(r.status == 200 for r in fake_anthropic.requests)
    routes = [r.path.rsplit("/", 1)[-1] for r in fake_bedrock.requests]
    assert routes == ["invoke", "invoke-with-response-stream", "invoke-with-response-stream"]
    assert thought_back(fake_anthropic)
    assert all("AWS4-HMAC-SHA256" in r.headers["authorization"] for r in fake_bedrock.requests)
    assert fake_bedrock.secret_key not in res.stdout + res.stderr


def test_a_run_on_vertex_ends_in_a_commit(fake_vertex, fake_anthropic, buggy_repo, tmp_path):
    fake_anthropic.script(NOTE)
    fake_anthropic.thinking = {"enabled"}
    key = fake_vertex.key_file(tmp_path / "service-account.json")
    res = decode(tmp_path, buggy_repo, {**fake_vertex.env(key), "DECODE_MODEL": "claude-sonnet-4-5@20250929"})
    committed(res, buggy_repo)
    assert len(fake_anthropic.token_counts) == 1 and len(fake_anthropic.requests) == 2
    assert all(r.path.endswith(":streamRawPredict") for r in fake_vertex.requests[1:]) and thought_back(fake_anthropic)
    assert len(fake_vertex.token_requests) == 1


def test_a_wrong_aws_secret_is_one_line_naming_the_aws_variables(fake_bedrock, fake_anthropic, buggy_repo,
                                                                  tmp_path):
    res = decode(tmp_path, buggy_repo, {**fake_bedrock.env(), "AWS_SECRET_ACCESS_KEY": WRONG_SECRET})
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    [line] = res.stderr.strip().splitlines()[-1:]
    assert line.startswith("decode: Amazon Bedrock refused the credentials (403 error: The request signature")
    assert "check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY" in line
    assert WRONG_SECRET not in res.stdout + res.stderr
    assert len(fake_bedrock.requests) == 1 and fake_anthropic.requests == []
    assert git(buggy_repo, "branch", "--list") == "* main"  # nothing was cloned or committed


@pytest.mark.parametrize(("env", "says"), [
    ({"AWS_REGION": ""}, "DECODE_PROVIDER=bedrock: no AWS region: set AWS_REGION"),
    ({"AWS_SECRET_ACCESS_KEY": ""}, "DECODE_PROVIDER=bedrock: AWS_SECRET_ACCESS_KEY is not set"),
    ({"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""},
     "DECODE_PROVIDER=bedrock: no AWS credentials were found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"),
    ({"AWS_BEARER_TOKEN_BEDROCK": "bedrock-api-key-0"}, "set AWS_BEARER_TOKEN_BEDROCK or AWS credentials"),
    ({"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_PROFILE": "nosuch"},
     "DECODE_PROVIDER=bedrock: the AWS configuration cannot be read (The config profile (nosuch) could not be "
     "found): check AWS_PROFILE"),
    ({"PYTHONPATH": "{blocker}:{root}"}, "DECODE_PROVIDER=bedrock needs boto3, which is not installed: "
                                         "pip install 'decode-bot[bedrock] @ "
                                         "git+https://github.com/decode-bot/decode-bot'"),
    ({"DECODE_PROVIDER": "vertex"}, "DECODE_PROVIDER=vertex: CLOUD_ML_REGION is not set"),
    ({"DECODE_PROVIDER": "vertex", "CLOUD_ML_REGION": "us-east5"},
     "DECODE_PROVIDER=vertex: ANTHROPIC_VERTEX_PROJECT_ID is not set"),
    ({"DECODE_PROVIDER": "azure"}, "DECODE_PROVIDER='azure' is not valid: set it to one of anthropic, bedrock, "
                                   "vertex"),
], ids=["no region", "half a key pair", "no credentials", "key and token", "unknown profile", "no boto3",
        "vertex without region", "vertex without project", "unknown provider"])
def test_a_provider_that_cannot_work_is_named_before_any_request(fake_bedrock, fake_anthropic, buggy_repo, tmp_path,
                                                                 env, says):
    blocker = tmp_path / "blocker"  # `sitecustomize` marks boto3 as not importable, as if never installed
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text("import sys\nsys.modules['boto3'] = None\n")
    fill = {"{blocker}": str(blocker), "{root}": str(EXAMPLE.parents[1])}
    for name, value in env.items():
        for marker, path in fill.items():
            value = value.replace(marker, path)
        env[name] = value
    res = decode(tmp_path, buggy_repo, {**fake_bedrock.env(), "AWS_CONFIG_FILE": str(tmp_path / "none"),
                                        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"), **env})
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.strip().splitlines() == [f"decode: {says}"] or says in res.stderr.strip().splitlines()[-1]
    assert len(res.stderr.strip().splitlines()[-1].splitlines()) == 1
    assert fake_bedrock.requests == [] and fake_anthropic.requests == []
