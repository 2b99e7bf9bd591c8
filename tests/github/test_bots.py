"""`allowed_bots` in the default branch's decode.yml: the bots whose label or command starts a run, with GitHub's
own webhook examples against the fake GitHub. The world's token acts as github-actions[bot] (as the Action's does),
so that login is decode-bot itself here."""

from __future__ import annotations

from bot.github.triggers import Router, Rules
from bot.github.work import Issue
from tests.support.github_job import NAME, OWNER, REPO, delivery, edit_turns, run, world  # noqa: F401 (fixture)

TRIAGE = "my-triage[bot]"


def allow(fake, *logins: str) -> None:
    body = "allowed_bots:\n" + "".join(f"  - {login}\n" for login in logins) if logins else ""
    fake.push_branch(OWNER, NAME, "main", {".github/decode.yml": body + "verify_rounds: 1\n"})


def labeled(fake, sender: str) -> tuple[int, dict]:
    number = fake.add_issue(OWNER, NAME, "Take notes", "Write notes.", user="alice")
    return number, delivery("issues", "labeled", sender=sender, sender_type="Bot", issue__number=number,
                            label__name="agent")


def test_a_label_added_by_an_allowed_bot_starts_a_run_that_names_it(world):
    fake, anthropic, *_ = world
    allow(fake, "My-Triage[bot]")  # GitHub compares logins without case
    number, payload = labeled(fake, TRIAGE)
    work = Router(Rules()).decide("issues", payload)
    assert isinstance(work, Issue) and (work.number, work.sender_login, work.sender_type) == (number, TRIAGE, "Bot")
    anthropic.script(edit_turns("first"))
    done = run(world, "issues", payload, run_id="job-1")
    assert done.state == "success", done.message
    assert len(fake.pulls(OWNER, NAME)) == 1 and fake.pulls(OWNER, NAME)[0]["head"]["ref"].startswith("decode/")
    [tracking] = [c["body"] for c in fake.comments(OWNER, NAME, number)]
    assert f"Started by `{TRIAGE}`" in tracking and "allowed_bots" in tracking


def test_a_command_by_an_allowed_bot_names_its_workflow_run(world):
    fake, anthropic, *_ = world
    allow(fake, TRIAGE)
    number = fake.add_issue(OWNER, NAME, "Take notes", "Write notes.", user="alice")
    fake.add_user(TRIAGE, type="Bot")
    link = f"https://github.com/{REPO}/actions/runs/4242"
    body = f"/decode write the notes (triaged in {link})"
    comment_id = fake.add_comment(OWNER, NAME, number, body, user=TRIAGE)
    anthropic.script(edit_turns("first"))
    done = run(world, "issue_comment", delivery("issue_comment", "created", sender=TRIAGE, sender_type="Bot",
                                                issue__number=number, comment__id=comment_id, comment__body=body))
    assert done.state == "success", done.message
    tracking = [c["body"] for c in fake.comments(OWNER, NAME, number) if "decode-bot:run:" in c["body"]]
    assert len(tracking) == 1 and f"[its workflow run]({link})" in tracking[0]


def test_a_label_added_by_another_bot_starts_nothing_silently(world):
    fake, anthropic, *_ = world
    allow(fake, TRIAGE)
    number, payload = labeled(fake, "renovate[bot]")
    skipped = run(world, "issues", payload, run_id="job-1")
    assert skipped.state == "skipped" and "does not list" in skipped.message
    assert not fake.comments(OWNER, NAME, number) and not anthropic.requests and not fake.pulls(OWNER, NAME)
    assert not fake.reactions(OWNER, NAME, issue=number)


def test_no_bot_starts_a_run_without_the_key(world):
    fake, anthropic, *_ = world
    number, payload = labeled(fake, TRIAGE)
    assert run(world, "issues", payload, run_id="job-1").state == "skipped"
    assert not fake.comments(OWNER, NAME, number) and not anthropic.requests


def test_decode_bot_itself_is_never_allowed_even_listed(world):
    fake, anthropic, *_ = world
    allow(fake, "github-actions[bot]", TRIAGE)  # the world's token acts as github-actions[bot]
    number, payload = labeled(fake, "github-actions[bot]")
    skipped = run(world, "issues", payload, run_id="job-1")
    assert skipped.state == "skipped" and "decode-bot itself" in skipped.message
    assert not fake.comments(OWNER, NAME, number) and not anthropic.requests


def test_allowed_bots_on_a_branch_other_than_the_default_does_not_count(world):
    fake, anthropic, *_ = world
    fake.push_branch(OWNER, NAME, "feature", {".github/decode.yml": f"allowed_bots: ['{TRIAGE}']\n"}, start="main")
    number, payload = labeled(fake, TRIAGE)
    assert run(world, "issues", payload, run_id="job-1").state == "skipped"
    assert not fake.comments(OWNER, NAME, number) and not anthropic.requests
