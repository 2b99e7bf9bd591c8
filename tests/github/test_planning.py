"""`/decode plan` then `/decode go` on an issue, with GitHub's own webhook examples against the fake GitHub and
the fake Messages API: the planning run is offered no write or edit tool, pushes nothing and posts the plan
comment; `go` carries the plan out as a writer edited it."""

from __future__ import annotations

import json
import subprocess

from bot.github.planning import PLAN_MARKER
from bot.github.triggers import Ignore, Router, Rules
from bot.github.work import Go, PlanRequest
from tests.fakes.github_check_runs import decode_runs
from tests.support.github_job import NAME, OWNER, delivery, run, world  # noqa: F401 (fixture)

PLAN = "## What I found\nis_weekend uses `> 5`.\n## Steps\n1. Use `>= 5` in calendar_utils.py.\n" \
       "## What I will not touch\nThe tests.\n## Open questions\nNone"


def command(fake, number: int, body: str, sender: str = "alice", sender_type: str = "User") -> dict:
    """GitHub's issue_comment.created example for `body`, posted by `sender` on issue `number` now."""
    comment_id = fake.add_comment(OWNER, NAME, number, body, user=sender)
    return delivery("issue_comment", "created", sender=sender, sender_type=sender_type, issue__number=number,
                    comment__id=comment_id, comment__body=body)


def plan_comments(fake, number: int) -> list[dict]:
    return [c for c in fake.comments(OWNER, NAME, number) if PLAN_MARKER in c["body"]]


def planned_issue(world) -> int:
    """An issue with a plan posted by `/decode plan`, whose bash wrote a file and edited one."""
    fake, anthropic, *_ = world
    number = fake.add_issue(OWNER, NAME, "Saturdays are workdays", "is_weekend is wrong on Saturdays.", user="alice")
    anthropic.script([[{"type": "tool_use", "name": "bash", "input": {
        "command": "echo scratch > planned.txt && sed -i 's/> 5/>= 5/' calendar_utils.py && git status --short"}}],
        [{"type": "text", "text": PLAN}]])
    asked = len(anthropic.requests)
    ran = run(world, "issue_comment", command(fake, number, "/decode plan keep it small"), run_id="plan-1")
    assert ran.state == "success", ran.message
    for request in anthropic.requests[asked:]:
        assert [t["name"] for t in request.body["tools"]] == ["bash", "read", "glob", "grep"]
    assert "keep it small" in json.dumps(anthropic.requests[asked].body["messages"][0])
    return number


def test_plan_posts_the_plan_comment_and_pushes_nothing(world):
    fake, anthropic, *_ = world
    number = planned_issue(world)
    [posted] = plan_comments(fake, number)
    body = posted["body"]
    assert "## Steps" in body and "/decode go" in body and "/decode plan" in body and "turns" in body
    assert fake.pulls(OWNER, NAME) == [] and fake.file(OWNER, NAME, "main", "calendar_utils.py").count("> 5") == 1
    assert decode_runs(fake, OWNER, NAME) == []  # a check run only where a pull request exists
    assert "decode/" not in subprocess.run(["git", "branch", "-a"], cwd=fake.repo(OWNER, NAME).path,
                                           capture_output=True, text=True).stdout
    tracking = [c["body"] for c in fake.comments(OWNER, NAME, number) if "decode-bot:run:origin:plan-1" in c["body"]]
    assert len(tracking) == 1 and "plan comment" in tracking[0] and "Nothing was changed" in tracking[0]
    # a second plan replaces the first one's content, in the same comment
    anthropic.script([[{"type": "text", "text": "## Steps\n1. Something else."}]])
    assert run(world, "issue_comment", command(fake, number, "/decode plan again"), run_id="plan-2").state == "success"
    [again] = plan_comments(fake, number)
    assert again["id"] == posted["id"] and "Something else" in again["body"] and "is_weekend uses" not in again["body"]


def test_go_carries_out_the_plan_as_edited_with_the_instructions_in_a_new_workspace(world):
    fake, anthropic, *_ = world
    number = planned_issue(world)
    [posted] = plan_comments(fake, number)
    fake.issue_comments[posted["id"]]["body"] = posted["body"].replace("The tests.", "The tests and the README.")
    anthropic.script([[{"type": "tool_use", "name": "bash", "input": {
        "command": "cat planned.txt; grep -c '>= 5' calendar_utils.py"}}],
        [{"type": "tool_use", "name": "edit", "input": {"path": "calendar_utils.py", "old_string":
                                                         "return day.weekday() > 5",
                                                         "new_string": "return day.weekday() >= 5"}}],
        [{"type": "text", "text": "Done as planned."}]])
    asked = len(anthropic.requests)
    done = run(world, "issue_comment", command(fake, number, "/decode go and add a comment"), run_id="go-1")
    assert done.state == "success", done.message
    task = json.dumps(anthropic.requests[asked].body["messages"][0])
    assert "The tests and the README." in task and "and add a comment" in task and "approved plan" in task
    assert "To carry it out" not in task and "| turns |" not in task  # the plan, not our footer
    assert {"write", "edit"} <= {t["name"] for t in anthropic.requests[asked].body["tools"]}
    seen = json.dumps(anthropic.requests[asked + 1].body["messages"][-1])
    assert "No such file" in seen and "scratch" not in seen and "exit code 1" in seen.lower().replace(":", "")
    [pr] = fake.pulls(OWNER, NAME)
    assert posted["html_url"] in pr["body"] and f"Fixes #{number}" in pr["body"]
    assert "planned.txt" not in json.dumps(fake.file(OWNER, NAME, pr["head"]["ref"], "calendar_utils.py"))


def test_go_without_a_plan_is_one_reply_and_no_run(world):
    fake, anthropic, *_ = world
    number = fake.add_issue(OWNER, NAME, "Saturdays", "Fix it.", user="alice")
    payload = command(fake, number, "/decode go")
    for run_id in ("go-1", "go-1"):  # and its redelivery
        skipped = run(world, "issue_comment", payload, run_id=run_id)
        assert skipped.state == "skipped" and "no plan" in skipped.message
    replies = [c["body"] for c in fake.comments(OWNER, NAME, number) if "no plan" in c["body"]]
    assert len(replies) == 1 and "/decode plan" in replies[0]
    assert anthropic.requests == [] and fake.pulls(OWNER, NAME) == []


def test_a_plan_run_whose_agent_answers_nothing_posts_no_plan_and_says_so(world):
    fake, anthropic, *_ = world
    number = fake.add_issue(OWNER, NAME, "Saturdays", "Fix it.", user="alice")
    anthropic.script([[{"type": "text", "text": "\n\n"}]])  # it ends its turn with blank lines
    ran = run(world, "issue_comment", command(fake, number, "/decode plan"), run_id="blank")
    assert ran.state == "incomplete", ran.message
    assert plan_comments(fake, number) == [], "an empty plan was posted, for someone to say go to"
    tracking = [c["body"] for c in fake.comments(OWNER, NAME, number) if "decode-bot:run:origin:blank" in c["body"]]
    assert len(tracking) == 1 and "could not make a plan (the agent finished without an answer)" in tracking[0]
    refused = run(world, "issue_comment", command(fake, number, "/decode go"), run_id="go-blank")
    assert refused.state == "skipped" and "no plan" in refused.message


def test_an_allowed_bot_may_plan_but_only_a_person_says_go(world):
    fake, anthropic, *_ = world
    fake.push_branch(OWNER, NAME, "main", {".github/decode.yml": "allowed_bots: ['triage-bot[bot]']\n"})
    number = fake.add_issue(OWNER, NAME, "Saturdays", "Fix it.", user="alice")
    anthropic.script([[{"type": "text", "text": PLAN}]])
    bot = {"sender": "triage-bot[bot]", "sender_type": "Bot"}
    planned = run(world, "issue_comment", command(fake, number, "/decode plan", **bot), run_id="p")
    assert planned.state == "success", planned.message
    assert len(plan_comments(fake, number)) == 1
    asked = len(anthropic.requests)
    refused = run(world, "issue_comment", command(fake, number, "/decode go", **bot), run_id="g")
    assert refused.state == "skipped" and "only a person approves a plan" in refused.message
    assert len(anthropic.requests) == asked and fake.pulls(OWNER, NAME) == []


def test_a_reader_can_neither_plan_nor_go(world):
    fake, anthropic, *_ = world
    number = fake.add_issue(OWNER, NAME, "Saturdays", "Fix it.", user="alice")
    for word in ("plan", "go"):
        refused = run(world, "issue_comment", command(fake, number, f"/decode {word}", sender="rita"), run_id=word)
        assert refused.state == "skipped" and "write access" in refused.message
    assert anthropic.requests == [] and plan_comments(fake, number) == []
    assert sum("@rita" in c["body"] for c in fake.comments(OWNER, NAME, number)) == 2


def test_plan_and_go_are_read_from_the_command_on_issues_only():
    router = Router(Rules())
    issue = delivery("issue_comment", "created", comment__body="/decode plan\nsmall steps")
    assert isinstance(work := router.decide("issue_comment", issue), PlanRequest) and work.instructions == "small steps"
    assert isinstance(router.decide("issue_comment", delivery("issue_comment", "created", comment__body="/decode go")),
                      Go)
    on_pull = delivery("issue_comment", "created", comment__body="/decode plan")
    on_pull["issue"]["pull_request"] = {"url": "https://api.github.com/repos/octo/calendar/pulls/1"}
    assert isinstance(router.decide("issue_comment", on_pull), Ignore)
