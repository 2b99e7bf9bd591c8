"""`/decode continue`: a run capped by DECODE_MAX_TURNS, carried on on the same branch by a writer's command, with
GitHub's own webhook examples against the fake GitHub and the fake Messages API."""

from __future__ import annotations

import json

from bot.github.resume import read_state
from bot.github.triggers import Router, Rules
from bot.github.work import Continue
from tests.support.github_job import NAME, OWNER, REPO, delivery, run, world  # noqa: F401 (fixture)

def echo(text: str) -> list:
    return [{"type": "tool_use", "name": "bash", "input": {"command": f"echo '{text}' >> NOTES.md"}}]


def command(fake, number: int, body: str = "/decode continue", sender: str = "alice") -> dict:
    """GitHub's issue_comment.created example for a comment `sender` writes on pull request `number` now."""
    comment_id = fake.add_comment(OWNER, NAME, number, body, user=sender)
    payload = delivery("issue_comment", "created", sender=sender, issue__number=number, comment__id=comment_id,
                       comment__body=body)
    payload["issue"]["pull_request"] = {"url": f"https://api.github.com/repos/{REPO}/pulls/{number}"}
    return payload


def capped_pull(world) -> tuple[int, str]:
    """A labeled issue whose run stops at DECODE_MAX_TURNS=2 with one line of three written: its draft pull
    request's number and branch."""
    fake, anthropic, *_ = world
    number = fake.add_issue(OWNER, NAME, "Take notes", "Write three lines of notes.", user="alice")
    anthropic.script([echo("first"), [{"type": "text", "text": "Thinking about the second line."},
                                      {"type": "tool_use", "name": "bash", "input": {"command": "cat NOTES.md"}}],
                      echo("never")])
    capped = run(world, "issues", delivery("issues", "labeled", issue__number=number, label__name="agent"),
                 run_id="job-1", max_turns=2)
    assert capped.state == "incomplete", capped.message
    assert "/decode continue" in capped.message
    [pr] = fake.pulls(OWNER, NAME)
    assert pr["draft"] and fake.file(OWNER, NAME, pr["head"]["ref"], "NOTES.md") == "first\n"
    return pr["number"], pr["head"]["ref"]


def test_a_capped_run_is_carried_on_on_the_same_branch_and_one_pull_request_covers_both(world):
    fake, anthropic, *_ = world
    number, branch = capped_pull(world)
    first_head = fake.branch_sha(OWNER, NAME, branch)
    work = Router(Rules()).decide("issue_comment", command(fake, number, "/decode continue\nthen stop"))
    assert isinstance(work, Continue) and (work.number, work.instructions) == (number, "then stop")
    asked = len(anthropic.requests)
    anthropic.script([echo("second"), echo("third"), [{"type": "text", "text": "Wrote the second and third."}]])
    done = run(world, "issue_comment", command(fake, number), run_id="job-2", max_turns=5)
    assert done.state == "success", done.message
    task = json.dumps(anthropic.requests[asked].body["messages"][0])
    assert "stopped at the turn limit" in task and "Write three lines of notes." in task
    assert "Thinking about the second line." in task and "cat NOTES.md" in task  # its last words, its last steps
    assert fake.file(OWNER, NAME, branch, "NOTES.md") == "first\nsecond\nthird\n"
    assert fake.branch_sha(OWNER, NAME, branch) != first_head and len(fake.pulls(OWNER, NAME)) == 1
    [pr] = fake.pulls(OWNER, NAME)
    body = pr["body"]
    assert "Run 2 of 2" in body and "Wrote the second and third." in body and "Earlier runs on this branch" in body
    assert "Thinking about the second line." in body and "Fixes #" in body
    state = read_state(body)
    assert state is not None and [r.stop for r in state.runs] == ["max_turns", "completed"]
    tracking = [c["body"] for c in fake.comments(OWNER, NAME, number) if "decode-bot:run:origin:job-2" in c["body"]]
    assert len(tracking) == 1 and "Pushed" in tracking[0] and "covers all 2 runs" in tracking[0]


def test_continue_is_answered_not_run_once_the_last_run_finished_and_a_second_time_on_one_stop(world):
    fake, anthropic, *_ = world
    number, _ = capped_pull(world)
    anthropic.script([echo("second"), [{"type": "text", "text": "Done."}]])
    assert run(world, "issue_comment", command(fake, number), run_id="job-2").state == "success"
    asked = len(anthropic.requests)
    again = run(world, "issue_comment", command(fake, number), run_id="job-3")
    assert again.state == "skipped" and "finished" in again.message
    assert len(anthropic.requests) == asked
    replies = [c["body"] for c in fake.comments(OWNER, NAME, number) if "continue-refused" in c["body"]]
    assert len(replies) == 1 and "nothing to continue" in replies[0]


def test_one_stop_is_continued_once(world):
    fake, anthropic, *_ = world
    number, branch = capped_pull(world)
    anthropic.script([echo("second"), [{"type": "text", "text": "Done."}]])
    # the first continuing run cannot write the description (GitHub refuses the edit, and again when the failure
    # is to be recorded there): it fails after its push, and the stop it continued stays continued
    fake.inject("PATCH", rf"/repos/{REPO}/pulls/{number}$", 422, body={"message": "Validation Failed"}, times=2)
    first = run(world, "issue_comment", command(fake, number), run_id="job-2")
    assert first.state == "failed", first.message
    head, asked = fake.branch_sha(OWNER, NAME, branch), len(anthropic.requests)
    payload = command(fake, number)
    for run_id in ("job-3", "job-3"):  # a second command on the same stop, and its redelivery: one answer
        again = run(world, "issue_comment", payload, run_id=run_id)
        assert again.state == "skipped" and "already being continued" in again.message
    assert len(anthropic.requests) == asked and fake.branch_sha(OWNER, NAME, branch) == head
    replies = [c["body"] for c in fake.comments(OWNER, NAME, number) if "already being continued" in c["body"]]
    assert len(replies) == 1 and "origin:job-1" in replies[0]


def test_continue_by_a_reader_is_refused_and_starts_nothing(world):
    fake, anthropic, *_ = world
    number, branch = capped_pull(world)
    head, asked = fake.branch_sha(OWNER, NAME, branch), len(anthropic.requests)
    refused = run(world, "issue_comment", command(fake, number, sender="rita"), run_id="job-2")
    assert refused.state == "skipped" and "write access" in refused.message
    assert len(anthropic.requests) == asked and fake.branch_sha(OWNER, NAME, branch) == head
    assert any("@rita" in c["body"] and "write access" in c["body"] for c in fake.comments(OWNER, NAME, number))


def test_a_command_run_on_the_pull_request_is_the_last_run_continue_looks_at(world):
    fake, anthropic, *_ = world
    number, branch = capped_pull(world)
    body = fake.pulls(OWNER, NAME)[0]["body"]
    anthropic.script([echo("fourth"), [{"type": "text", "text": "Added a fourth line."}]])
    assert run(world, "issue_comment", command(fake, number, "/decode add a fourth line"), run_id="job-2").state \
        == "success"
    pr = fake.pulls(OWNER, NAME)[0]
    state = read_state(pr["body"])
    assert state is not None and [r.stop for r in state.runs] == ["max_turns", "completed"]
    assert pr["body"].split("<!-- decode-bot:state:")[0] == body.split("<!-- decode-bot:state:")[0]  # as it was
    finished = run(world, "issue_comment", command(fake, number), run_id="job-3")
    assert finished.state == "skipped" and "finished" in finished.message
    anthropic.script([echo("fifth"), echo("sixth"), echo("seventh")])
    assert run(world, "issue_comment", command(fake, number, "/decode add three more"), run_id="job-4",
               max_turns=2).state == "incomplete"
    asked = len(anthropic.requests)
    anthropic.script([[{"type": "text", "text": "The seventh was left; nothing else to do."}]])
    assert run(world, "issue_comment", command(fake, number), run_id="job-5").state == "no_changes"
    task = json.dumps(anthropic.requests[asked].body["messages"][0])
    assert "add three more" in task and "echo 'sixth'" in task  # the capped command's own task and last steps
    assert fake.file(OWNER, NAME, branch, "NOTES.md") == "first\nfourth\nfifth\nsixth\n"


def test_a_continuing_run_that_fails_leaves_its_failure_as_the_stop_to_continue(world):
    fake, anthropic, *_ = world
    number, branch = capped_pull(world)
    anthropic.script([echo("second"), [{"type": "text", "text": "Done."}]])
    fake.inject("PATCH", rf"/repos/{REPO}/pulls/{number}$", 422, body={"message": "Validation Failed"})
    assert run(world, "issue_comment", command(fake, number), run_id="job-2").state == "failed"
    state = read_state(fake.pulls(OWNER, NAME)[0]["body"])
    assert state is not None and [(r.tag, r.stop) for r in state.runs][-1] == ("origin:job-2", "error")
    anthropic.script([[{"type": "text", "text": "The second line is there; nothing left."}]])
    assert run(world, "issue_comment", command(fake, number), run_id="job-3").state == "no_changes"
    assert fake.file(OWNER, NAME, branch, "NOTES.md") == "first\nsecond\n"
    assert "Run 3 of 3" in fake.pulls(OWNER, NAME)[0]["body"]
