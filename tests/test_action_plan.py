"""`/decode plan` in the Action, run the way the Actions runner runs action.yml, against the fake GitHub and the
fake Messages API: the plan comment is posted, nothing is pushed, and the model was offered no write or edit."""

from __future__ import annotations

from bot.github.planning import PLAN_MARKER
from tests.support.action import NAME, OWNER, rewritten, runner, runner_temp  # noqa: F401 (fixtures)


def test_plan_in_the_action_posts_the_plan_and_pushes_nothing(runner, fake_github, fake_anthropic):
    number = fake_github.add_issue(OWNER, NAME, "Weekend check is wrong", "Saturdays count.", user="alice")
    body = "/decode plan keep it small"
    comment = fake_github.add_comment(OWNER, NAME, number, body, user="alice")
    fake_anthropic.script([[{"type": "tool_use", "name": "bash", "input": {"command": "touch planned.txt"}}],
                           [{"type": "text", "text": "## Steps\n1. Use `>= 5`."}]])
    payload = rewritten("issue_comment", "created", issue__number=number, comment__id=comment, comment__body=body)
    code, outputs, summary, log = runner.run("issue_comment", payload, {"anthropic_api_key": fake_anthropic.api_key})
    assert code == 0, log
    assert outputs["conclusion"] == "success" and not outputs["pr_url"]
    [plan] = [c["body"] for c in fake_github.comments(OWNER, NAME, number) if PLAN_MARKER in c["body"]]
    assert "Use `>= 5`." in plan and "/decode go" in plan
    assert fake_github.pulls(OWNER, NAME) == []
    for request in fake_anthropic.requests:
        assert not {"write", "edit"} & {t["name"] for t in request.body["tools"]}
