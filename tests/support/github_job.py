"""A GitHub job driven in process: real webhook examples rewritten to the fake repository, PyGithub
against the fake GitHub and the real anthropic SDK against the fake Messages API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.github.auth import TokenCredentials
from bot.github.forge import GitHubForge
from bot.github.job import JobContext, run_github_job
from bot.github.retry import GitHubRetry
from bot.model.anthropic import AnthropicModel
from bot.github.triggers import Ignore, Router, Rules
from tests.fakes.webhook_examples import example

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fix-weekend"
SESSION = json.loads((EXAMPLE / "session.json").read_text())
FILES = {p.name: p.read_text() for p in (EXAMPLE / "repo").iterdir()}
OWNER, NAME, REPO = "octo", "calendar", "octo/calendar"


def edit_turns(text: str) -> list:
    return [[{"type": "tool_use", "name": "bash", "input": {"command": f"echo '{text}' >> NOTES.md"}}],
            [{"type": "text", "text": f"Added {text}."}]]


@pytest.fixture
def world(fake_github, fake_anthropic, tmp_path):
    """The fake GitHub with a buggy repo and two people, plus settings and a forge pointing at it."""
    fake_github.add_repo(OWNER, NAME, FILES)
    for login, role in (("alice", "write"), ("rita", "read")):
        fake_github.add_user(login)
        fake_github.set_permission(OWNER, NAME, login, role)
    settings = fake_anthropic.settings(sandbox_mode="local", data_dir=tmp_path / "data",
                                       github_api_url=fake_github.api_url, github_token=fake_github.token)
    sleeps: list[float] = []
    forge = GitHubForge(TokenCredentials(fake_github.token, fake_github.api_url),
                        retry=GitHubRetry(sleep=sleeps.append))
    return fake_github, fake_anthropic, settings, forge, sleeps


def delivery(event: str, action: str, sender: str = "alice", sender_type: str = "User", **changes) -> dict:
    """A real @octokit/webhooks-examples payload of `event.action`, rewritten to the fake repository."""
    return example(event, action, repo=REPO, sender=sender, sender_type=sender_type, **changes)


def as_sent(fake, payload: dict) -> dict:
    """`payload` with the issue's or pull request's title and body as the fake holds them now, as GitHub
    would send them at this moment."""
    for key in ("issue", "pull_request"):
        item = payload.get(key)
        if isinstance(item, dict) and item.get("number") in fake.repo(OWNER, NAME).issues:
            current = fake.issue(OWNER, NAME, item["number"])
            payload = {**payload, key: {**item, "title": current["title"], "body": current["body"] or None}}
    return payload


def run(world, event: str, payload: dict, run_id: str = "r1", **kw):
    fake, anthropic, settings, forge, _ = world
    trigger = Router(Rules.of(settings.github)).decide(event, as_sent(fake, payload))
    assert not isinstance(trigger, Ignore), trigger
    model = AnthropicModel(settings.model, sleep=lambda s: None)
    return run_github_job(JobContext(trigger, forge, run_id=run_id, tag=f"origin:{run_id}",
                                     model=model, run_url="https://ci.example/run/1"), settings.replace(**kw).job)
