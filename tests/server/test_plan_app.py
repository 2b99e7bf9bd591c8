"""`/decode plan` then `/decode go` through a running `decode serve` (the App): GitHub's issue_comment.created
example, signed and sent to /webhook, against the fake GitHub and the fake Messages API."""

from __future__ import annotations

import json

from bot.github.planning import PLAN_MARKER
from tests.fakes.webhook_examples import example
from tests.support.server import NAME, OWNER, Server, env, wait_for  # noqa: F401 (fixture)

PLAN = [[{"type": "tool_use", "name": "bash", "input": {"command": "echo scratch > planned.txt"}}],
        [{"type": "text", "text": "## Steps\n1. Write NOTES.md."}]]
GO = [[{"type": "tool_use", "name": "bash", "input": {"command": "ls planned.txt; echo noted > NOTES.md"}}],
      [{"type": "text", "text": "Wrote the notes as planned."}]]


def comment(fake, number: int, body: str) -> dict:
    issue = fake.issue(OWNER, NAME, number)
    cid = fake.add_comment(OWNER, NAME, number, body, user="alice")
    return example("issue_comment", "created", repo=f"{OWNER}/{NAME}", sender="alice", sender_type="User",
                   issue__number=number, issue__title=issue["title"], issue__body=issue["body"], comment__id=cid,
                   comment__body=body)


def test_the_app_posts_a_plan_pushing_nothing_then_go_opens_the_pull_request(env, fake_github, fake_anthropic,
                                                                              tmp_path):
    number = fake_github.add_issue(OWNER, NAME, "Take notes", "Write NOTES.md.", user="alice")
    server = Server(env, tmp_path / "serve.log")
    try:
        fake_anthropic.script(PLAN)
        assert server.post("issue_comment", comment(fake_github, number, "/decode plan")) == 202
        [posted] = wait_for(lambda: [c for c in fake_github.comments(OWNER, NAME, number)
                                     if PLAN_MARKER in c["body"]], what="the plan comment")
        assert "Write NOTES.md." in posted["body"] and fake_github.pulls(OWNER, NAME) == []
        planning = len(fake_anthropic.requests)
        assert all("write" not in [t["name"] for t in r.body["tools"]] for r in fake_anthropic.requests)
        fake_anthropic.script(GO)
        assert server.post("issue_comment", comment(fake_github, number, "/decode go")) == 202
        [pr] = wait_for(lambda: fake_github.pulls(OWNER, NAME), what="the pull request")
    finally:
        assert server.stop() == 0
    assert posted["html_url"] in pr["body"] and f"Fixes #{number}" in pr["body"]
    seen = json.dumps(fake_anthropic.requests[planning + 1].body["messages"][-1])
    assert "No such file" in seen  # the planning run's file is in no later workspace
    assert "Write NOTES.md." in json.dumps(fake_anthropic.requests[planning].body["messages"][0])
