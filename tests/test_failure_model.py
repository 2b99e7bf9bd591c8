"""One failure model (issue 11): a rejected key or an unknown model id is found by a preflight before any
clone, and a model that fails mid-run keeps the work so far; either way the run ends `failed` (exit 1)
in the CLI, the Action and the App's worker. Real fakes throughout: the fake Messages API rejects a key
it does not know and a model id it does not serve, and answers 529 from a chosen turn on."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from bot.config import DEFAULT_MODEL
from bot.errors import DecodeError
from bot.github.auth import TokenCredentials
from bot.github.forge import GitHubForge
from bot.github.retry import GitHubRetry
from bot.model.anthropic import AnthropicModel
from bot.server.intake import job_key, job_payload
from bot.server.run import job_handler
from bot.store import Store
from bot.triggers import Trigger
from bot.worker import WorkerPool
from tests.conftest import make_repo
from tests.test_action import rewritten, runner, runner_temp  # noqa: F401 (fixtures)
from tests.test_cli import DECODE, EXAMPLE

OWNER, NAME, REPO = "octo", "calendar", "octo/calendar"
FILES = {p.name: p.read_text() for p in (EXAMPLE / "repo").iterdir()}
WRONG_KEY = "sk-ant-wrong-key-0000000000"
REJECTED = "ANTHROPIC_API_KEY was rejected (401 authentication_error): set a valid key"
EDIT_THEN_MORE = [[{"type": "tool_use", "name": "bash", "input": {"command": "echo partial >> NOTES.md"}}],
                  [{"type": "text", "text": "never served"}]]


def git_requests(fake_github) -> list:
    return [r for r in fake_github.requests if r.kind == "git"]


def clones(data_dir: Path) -> list[Path]:
    return list(data_dir.rglob(".git")) if data_dir.exists() else []


def cli(fake_anthropic, fake_github, tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    full_env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), "ANTHROPIC_API_KEY": fake_anthropic.api_key,
                "ANTHROPIC_BASE_URL": fake_anthropic.url, "SANDBOX_MODE": "local",
                "DECODE_DATA_DIR": str(tmp_path / "data"), "GITHUB_TOKEN": fake_github.token,
                "GITHUB_API_URL": fake_github.api_url, **env}
    return subprocess.run([DECODE, "run", *args], env=full_env, capture_output=True, text=True, timeout=240)


# -- the preflight, on the model boundary -------------------------------------------------------------------

def test_the_preflight_names_a_rejected_key_and_an_unknown_model(fake_anthropic):
    with pytest.raises(DecodeError) as wrong:
        AnthropicModel(fake_anthropic.settings(anthropic_api_key=WRONG_KEY)).check()
    assert str(wrong.value) == REJECTED
    fake_anthropic.models = {DEFAULT_MODEL}
    with pytest.raises(DecodeError) as unknown:
        AnthropicModel(fake_anthropic.settings(model="claude-nope-1")).check()
    assert str(unknown.value) == "DECODE_MODEL=claude-nope-1 is not a model this key can use: model: claude-nope-1"
    AnthropicModel(fake_anthropic.settings()).check()  # a good key and model pass
    assert [r.status for r in fake_anthropic.token_counts] == [401, 404, 200] and not fake_anthropic.requests


# -- a wrong key ends `failed` everywhere, before any clone -------------------------------------------------

def test_cli_with_a_wrong_key_fails_in_one_line_before_any_clone(fake_anthropic, fake_github, tmp_path):
    fake_github.add_repo(OWNER, NAME, FILES)
    local = make_repo(tmp_path / "local", FILES)
    for args in (("--repo", str(local), "fix it"), ("--repo", REPO, "fix it")):
        res = cli(fake_anthropic, fake_github, tmp_path, *args, ANTHROPIC_API_KEY=WRONG_KEY)
        assert res.returncode == 1, res.stderr
        assert res.stderr.strip().splitlines()[-1] == f"decode: {REJECTED}"
        assert "Traceback" not in res.stderr and WRONG_KEY not in res.stdout + res.stderr
    assert not clones(tmp_path / "data") and not git_requests(fake_github)
    assert not fake_anthropic.requests and not fake_github.pulls(OWNER, NAME)


def test_cli_with_an_unknown_model_id_says_so(fake_anthropic, fake_github, tmp_path):
    fake_anthropic.models = {DEFAULT_MODEL}
    local = make_repo(tmp_path / "local", FILES)
    res = cli(fake_anthropic, fake_github, tmp_path, "--repo", str(local), "fix it", DECODE_MODEL="claude-nope-1")
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert res.stderr.strip().splitlines()[-1].startswith(
        "decode: DECODE_MODEL=claude-nope-1 is not a model this key can use")
    assert not clones(tmp_path / "data")


def test_action_with_a_wrong_key_fails_with_outputs_and_summary(runner, fake_github, fake_anthropic):  # noqa: F811
    number = fake_github.add_issue(OWNER, NAME, "Weekend check is wrong", "", user="alice")
    code, outputs, summary, log = runner.run("issues", rewritten("issues", "labeled", issue__number=number,
                                                                 label__name="agent"),
                                             {"anthropic_api_key": WRONG_KEY})
    assert code == 1, log
    assert outputs["conclusion"] == "failed" and outputs["pr_url"] == ""
    assert "decode-bot: failed" in summary and REJECTED in summary
    assert f"::error title=decode-bot::{REJECTED}" in log and "Traceback" not in log
    [tracking] = fake_github.comments(OWNER, NAME, number)
    assert REJECTED in tracking["body"] and "made no changes" not in tracking["body"]
    assert not git_requests(fake_github) and not fake_github.pulls(OWNER, NAME)
    assert WRONG_KEY not in log + summary + tracking["body"]


def test_app_worker_with_a_wrong_key_fails_the_job_and_says_why(fake_anthropic, fake_github, tmp_path):
    fake_github.add_repo(OWNER, NAME, FILES)
    fake_github.add_user("alice")
    fake_github.set_permission(OWNER, NAME, "alice", "write")
    number = fake_github.add_issue(OWNER, NAME, "Weekend check is wrong", "", user="alice")
    settings = fake_anthropic.settings(anthropic_api_key=WRONG_KEY, sandbox_mode="local", data_dir=tmp_path / "data",
                                       github_api_url=fake_github.api_url)
    forge = GitHubForge(TokenCredentials(fake_github.token, fake_github.api_url),
                        retry=GitHubRetry(sleep=lambda s: None), throttle=False)
    trigger = Trigger(kind="issue", repo=REPO, number=number, sender_login="alice", sender_type="User")
    store = Store(tmp_path / "jobs.sqlite3")
    job_id = store.record_delivery("d-1", "issues", "queued", (job_key(trigger), job_payload(trigger, "issues", "d-1")))
    pool = WorkerPool(store, job_handler(settings, forge), size=1, poll_s=0.02)
    pool.start()
    try:
        deadline = time.monotonic() + 60
        while store.job(job_id).state in ("queued", "running") and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        pool.stop(grace_s=5)
    job = store.job(job_id)
    store.close()
    assert job.state == "failed" and REJECTED in (job.error or "")
    [tracking] = fake_github.comments(OWNER, NAME, number)
    assert REJECTED in tracking["body"]
    assert not git_requests(fake_github) and not clones(tmp_path / "data")


# -- a model failure mid-run keeps the work, as a draft marked with the error ----------------------------------

def test_a_model_outage_mid_run_leaves_a_draft_with_the_work_and_fails(fake_anthropic, fake_github, tmp_path):
    fake_github.add_repo(OWNER, NAME, FILES)
    fake_anthropic.script(EDIT_THEN_MORE)
    fake_anthropic.inject(529, retry_after_ms=1, at=1)  # the first turn is served; every retry of the second fails
    res = cli(fake_anthropic, fake_github, tmp_path, "--repo", REPO, "write notes")
    assert res.returncode == 1, res.stderr
    assert "Traceback" not in res.stderr
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("decode: decode-bot failed: the Anthropic API") and "529" in last
    [pr] = fake_github.pulls(OWNER, NAME)
    assert pr["draft"] and pr["html_url"] in last
    assert "**Failed: stopped by an error.**" in pr["body"] and "529 overloaded_error" in pr["body"]
    assert fake_github.file(OWNER, NAME, pr["head"]["ref"], "NOTES.md") == "partial\n"
    assert [r.status for r in fake_anthropic.requests] == [200] + [529] * 6


# -- the GitHub side of the preflight ----------------------------------------------------------------------------

def test_the_repository_preflight_retries_a_502_and_names_a_rejected_token(fake_github):
    fake_github.add_repo(OWNER, NAME, FILES)
    fake_github.inject("GET", rf"^/repos/{OWNER}/{NAME}$", status=502)
    sleeps: list[float] = []
    forge = GitHubForge(TokenCredentials(fake_github.token, fake_github.api_url),
                        retry=GitHubRetry(sleep=sleeps.append), throttle=False)
    assert forge.repository(REPO).full_name == REPO and len(sleeps) == 1
    wrong = GitHubForge(TokenCredentials("ghp_" + "x" * 36, fake_github.api_url),
                        retry=GitHubRetry(sleep=sleeps.append), throttle=False)
    with pytest.raises(DecodeError) as refused:
        wrong.repository(REPO)
    assert str(refused.value).startswith("the GitHub token was rejected") and "GITHUB_TOKEN" in str(refused.value)
    with pytest.raises(DecodeError) as missing:
        forge.repository("octo/nowhere")
    assert "octo/nowhere cannot be read with this token (404" in str(missing.value)
