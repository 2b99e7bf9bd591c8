"""Trigger rules over every payload of GitHub's own examples (npm @octokit/webhooks-examples 7.6.1)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from bot.github.triggers import APP_ROUTES, Ignore, Router, Rules, may_trigger, refusal_text
from bot.github.work import CheckSuite, Comment, Dispatch, Issue, Labels, ReviewComment, Work, job_payload, work_of
from tests.fakes.webhook_examples import ExamplesUnavailable, all_examples, example, examples

ROUTER = Router(Rules())


@pytest.fixture(scope="module")
def every() -> list[tuple[str, str, dict[str, Any]]]:
    """(host, event, payload) for every example; a failed fetch fails the test."""
    try:
        return all_examples()
    except ExamplesUnavailable as exc:
        message = str(exc)
    pytest.fail(message, pytrace=False)


def pick(every: list, event: str, action: str, pred=lambda p: True) -> list[dict[str, Any]]:
    found = [copy.deepcopy(p) for _, e, p in every if e == event and p.get("action") == action and pred(p)]
    assert found, f"no {event}.{action} example in the package"
    return found


def test_every_example_decides_without_exception(every) -> None:
    assert len(every) >= 700  # 329 for api.github.com, 726 with the GHES variants
    events = {e for _, e, _ in every}
    assert {"issues", "issue_comment", "pull_request_review_comment"} <= events
    for host, event, payload in every:
        decision = ROUTER.decide(event, copy.deepcopy(payload))
        assert isinstance(decision, (*Work.__args__, Ignore)), (host, event)
        if isinstance(decision, Ignore):
            assert decision.reason
        # No real example carries the trigger label or the command: none starts an agent as shipped. An
        # installation naming repositories asks for the trigger label in each.
        if event in ("installation", "installation_repositories") and not isinstance(decision, Ignore):
            assert isinstance(decision, Labels) and decision.repos, (host, event, payload.get("action"))
            assert payload["action"] in ("created", "added")
        else:
            assert isinstance(decision, Ignore), (host, event, payload.get("action"), decision)


def test_unhandled_events_and_actions_say_why(every) -> None:
    for _, event, payload in every:
        key = f"{event}.{payload.get('action')}" if payload.get("action") else event
        if key in APP_ROUTES:
            continue
        reason = ROUTER.decide(event, payload).reason
        assert event in reason and ("not one decode-bot acts on" in reason or "not handled" in reason)


def test_issues_labeled_triggers_iff_trigger_label(every) -> None:
    for payload in pick(every, "issues", "labeled"):
        assert payload["label"]["name"] != "agent"
        assert ROUTER.decide("issues", payload) == Ignore(
            f"label {payload['label']['name']!r} is not the trigger label 'agent'"
        )
        payload["label"]["name"] = "agent"
        t = ROUTER.decide("issues", payload)
        assert isinstance(t, Issue) and t.kind == "issue"
        assert (t.repo, t.number) == (payload["repository"]["full_name"], payload["issue"]["number"])
        assert (t.sender_login, t.sender_type) == (payload["sender"]["login"], "User")
        assert t.instructions == "" and t.title == payload["issue"]["title"]
        assert isinstance(Router(Rules(label="other")).decide("issues", payload), Ignore)


def test_issue_comment_created_with_command(every) -> None:
    payloads = pick(every, "issue_comment", "created")
    assert any("installation" in p for p in payloads)
    for payload in payloads:
        assert isinstance(ROUTER.decide("issue_comment", payload), Ignore)
        payload["comment"]["body"] = "/decode fix it"
        t = ROUTER.decide("issue_comment", payload)
        assert isinstance(t, Comment)
        assert t.instructions == "fix it"
        assert t.comment_id == payload["comment"]["id"]
        assert t.number == payload["issue"]["number"]
        is_pr = "pull_request" in payload["issue"]
        assert (t.kind, t.is_pull_request) == (("pr_comment", True) if is_pr else ("issue_comment", False))
        payload["issue"]["pull_request"] = {"url": "https://api.github.com/repos/o/r/pulls/1"}
        t = ROUTER.decide("issue_comment", payload)
        assert (t.kind, t.is_pull_request) == ("pr_comment", True)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("/decode", ""),
        ("  \n /decode   make the retry configurable  ", "make the retry configurable"),
        ("/decode fix it\r\nand add a test\r\n", "fix it\nand add a test"),
        ("/decode\nsecond line", "second line"),
        ("/decoder fix it", None),
        ("/decode-it fix", None),
        ("please /decode fix it", None),
        ("/DECODE fix it", None),
        ("", None),
        (None, None),
    ],
)
def test_command_matching(every, body, expected) -> None:
    payload = pick(every, "issue_comment", "created")[0]
    payload["comment"]["body"] = body
    decision = ROUTER.decide("issue_comment", payload)
    if expected is None:
        assert isinstance(decision, Ignore) and "/decode" in decision.reason
    else:
        assert isinstance(decision, Comment) and decision.instructions == expected


def test_custom_command(every) -> None:
    payload = pick(every, "issue_comment", "created")[0]
    payload["comment"]["body"] = "@bot do it"
    assert Router(Rules(command="@bot")).decide("issue_comment", payload).instructions == "do it"


def test_bot_senders_reach_the_job_which_reads_allowed_bots(every) -> None:
    """Whether a bot may start work is `allowed_bots` in the default branch's decode.yml, which the job reads
    (tests/github/test_bots.py): the router passes a bot's command and label on, kind and sender kept."""
    bots = [p["sender"] for _, _, p in every if (p.get("sender") or {}).get("type") == "Bot"]
    assert bots, "the package has real Bot senders (check_suite, workflow_job)"
    for sender in bots:
        payload = pick(every, "issue_comment", "created")[0]
        payload["comment"]["body"] = "/decode fix it"
        payload["sender"] = copy.deepcopy(sender)
        decision = ROUTER.decide("issue_comment", payload)
        assert isinstance(decision, Comment) and (decision.sender_login, decision.sender_type) == \
            (sender["login"], "Bot")


def test_edited_comments_never_retrigger(every) -> None:
    for event in ("issue_comment", "pull_request_review_comment"):
        for payload in pick(every, event, "edited"):
            payload["comment"]["body"] = "/decode fix it"
            assert ROUTER.decide(event, payload) == Ignore("edited comments never re-trigger work")


def test_review_comment_carries_file_line_and_hunk(every) -> None:
    for payload in pick(every, "pull_request_review_comment", "created"):
        comment = payload["comment"]
        comment["body"] = "/decode use more emoji here"
        t = ROUTER.decide("pull_request_review_comment", payload)
        assert isinstance(t, ReviewComment) and t.kind == "review_comment" and t.is_pull_request
        assert (t.path, t.diff_hunk) == (comment["path"], comment["diff_hunk"])
        assert t.line == (comment.get("line") if comment.get("line") is not None else comment.get("original_line"))
        assert t.instructions == "use more emoji here"
        assert t.number == payload["pull_request"]["number"]  # the branches come from GitHub at work time
    lined = [p for p in examples() if p[0] == "pull_request_review_comment" and p[1]["comment"].get("line")]
    assert lined and lined[0][1]["comment"]["path"] == "README.md"


def test_workflow_dispatch_needs_a_prompt(every) -> None:
    payload = copy.deepcopy(next(p for _, e, p in every if e == "workflow_dispatch"))
    assert isinstance(ROUTER.decide("workflow_dispatch", payload), Ignore)
    payload["inputs"] = {"prompt": "update the changelog"}
    t = ROUTER.decide("workflow_dispatch", payload)
    assert isinstance(t, Dispatch) and (t.kind, t.instructions, t.number) == ("dispatch", "update the changelog", None)


def test_malformed_payloads_are_ignored_not_raised() -> None:
    assert isinstance(ROUTER.decide("issues", {"action": "labeled", "label": {"name": "agent"}}), Ignore)
    assert isinstance(ROUTER.decide("issue_comment", {"action": "created", "comment": {"body": "/decode x"}}), Ignore)
    assert isinstance(ROUTER.decide("issues", []), Ignore)  # type: ignore[arg-type]


def test_permissions() -> None:
    assert [may_trigger(p) for p in ("admin", "maintain", "write")] == [True] * 3
    assert [may_trigger(p) for p in ("triage", "read", "none", "")] == [False] * 4
    text = refusal_text("octocat", "read", "/decode")
    assert "@octocat" in text and "`read`" in text and "/decode" in text and "write access" in text


@pytest.mark.parametrize("work", [
    Issue(repo="o/r", number=3, sender_login="alice", title="T", body="B"),
    Comment(repo="o/r", number=4, sender_login="alice", sender_type="User", comment_id=9, instructions="go",
            is_pull_request=True),
    ReviewComment(repo="o/r", number=5, sender_login="alice", sender_type="User", comment_id=10, instructions="x",
                  path="a.py", line=3, diff_hunk="@@"),
    Dispatch(repo="o/r", sender_login="alice", sender_type="User", instructions="bump", base_ref="release"),
])
def test_every_kind_of_work_reads_back_from_the_queue_as_it_went_in(work) -> None:
    stored = json.loads(json.dumps(job_payload(work, "event", "d-1")))
    assert work_of(stored) == work and stored["work"]["kind"] == work.kind


def test_a_job_stored_by_an_older_version_still_decodes() -> None:
    # the flat trigger of the version before bot/github/work.py, every field present, some since dropped
    stored = {"event": "issue_comment", "delivery": "d-1", "trigger": {
        "kind": "pr_comment", "repo": "o/r", "number": 3, "sender_login": "alice", "sender_type": "User",
        "is_pull_request": True, "comment_id": 7, "instructions": "fix", "path": None, "line": None,
        "diff_hunk": None, "base_ref": None, "title": "T", "body": "B", "head_ref": None, "installation_id": 42}}
    assert work_of(stored) == Comment(repo="o/r", number=3, sender_login="alice", sender_type="User", comment_id=7,
                                      instructions="fix", is_pull_request=True, title="T", body="B")


def suite_payload(conclusion: str = "failure", pulls: bool = True, same_repo: bool = True) -> dict[str, Any]:
    payload = example("check_suite", "completed", repo="o/r", sender="github-actions[bot]", sender_type="Bot")
    repo_id = payload["repository"]["id"]
    payload["check_suite"].update(conclusion=conclusion, pull_requests=[{
        "number": 5, "head": {"ref": "decode/issue-1-x", "sha": "a" * 40, "repo": {"id": repo_id if same_repo else 1}},
        "base": {"ref": "main", "sha": "b" * 40, "repo": {"id": repo_id}}}] if pulls else [])
    return payload


def test_a_failed_check_suite_on_a_pull_request_of_the_repository_is_work_whoever_sent_it() -> None:
    work = ROUTER.decide("check_suite", suite_payload())
    assert isinstance(work, CheckSuite) and (work.number, work.sender_type) == (5, "Bot")
    assert work.head_sha == suite_payload()["check_suite"]["head_sha"]
    assert work_of(json.loads(json.dumps(job_payload(work, "check_suite", "d")))) == work


@pytest.mark.parametrize("shape,why", [
    ({"conclusion": "success"}, "not a failure"),
    ({"conclusion": "cancelled"}, "not a failure"),
    ({"pulls": False}, "no pull request of this repository"),
    ({"same_repo": False}, "no pull request of this repository"),  # a fork's head
])
def test_a_passing_cancelled_or_fork_suite_starts_nothing(shape, why) -> None:
    decision = ROUTER.decide("check_suite", suite_payload(**shape))
    assert isinstance(decision, Ignore) and why in decision.reason
