"""The GitHub Action, run the way the Actions runner runs a composite action: action.yml is
read, `${{ }}` expressions are evaluated, each `run:` step runs in bash with the runner's
GITHUB_* variables, and step outputs flow through GITHUB_OUTPUT. The action talks to the
fake GitHub and the fake Messages API."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from bot.action import runner_sandbox
from bot.core.names import actions_origin, run_tag
from bot.github.conclusion import marker
from bot.github.triggers import APP_ROUTES
from tests.fakes.github_check_runs import decode_runs
from tests.support.action import (EXAMPLE, NAME, OWNER, REPO, ROOT, action_validator, rewritten, runner,  # noqa: F401
                                  runner_temp)  # (fixtures)

SESSION = json.loads((EXAMPLE / "session.json").read_text())
NOTES = [[{"type": "tool_use", "name": "bash", "input": {"command": "echo noted >> NOTES.md"}}],
         [{"type": "text", "text": "Wrote the notes."}]]


def test_a_labeled_issue_becomes_a_pull_request(runner, fake_github, fake_anthropic):
    number = fake_github.add_issue(OWNER, NAME, "Weekend check is wrong", "Saturdays count as workdays.",
                                   user="alice")
    fake_anthropic.script(SESSION["turns"])
    code, outputs, summary, log = runner.run("issues", rewritten("issues", "labeled", issue__number=number,
                                                                 label__name="agent"),
                                             {"anthropic_api_key": fake_anthropic.api_key})
    assert code == 0, log
    [pr] = fake_github.pulls(OWNER, NAME)
    assert outputs["pr_url"] == pr["html_url"] and outputs["conclusion"] == "success"
    assert outputs["branch"] == pr["head"]["ref"] and float(outputs["cost_usd"]) > 0
    assert (Path(outputs["transcript_path"]) / "transcript.jsonl").is_file()
    assert f"Fixes #{number}" in pr["body"] and "<summary>Transcript</summary>" in pr["body"]
    assert "| turns |" in summary and pr["html_url"] in summary and "Fixed `is_weekend`" in summary
    made = fake_github.api_commits[pr["head"]["sha"]]  # made through the API with the workflow's token: signed
    assert made["by"] == "github-actions[bot]" and made["signed"]
    tracking = fake_github.comments(OWNER, NAME, number)[0]["body"]
    assert f"{REPO}/actions/runs/4242" in tracking
    assert marker("run", run_tag(actions_origin(REPO), "4242")) in tracking  # no other repository's run 4242


def test_attempts_are_uploaded_together_and_the_body_names_each_in_the_artifact(runner, fake_github, fake_anthropic):
    fake_github.push_branch(OWNER, NAME, "main", {".github/decode.yml": "attempts: 2\n"})
    number = fake_github.add_issue(OWNER, NAME, "Weekend check is wrong", "Saturdays count as workdays.",
                                   user="alice")
    fake_anthropic.sessions([("Resolve issue #", SESSION["turns"]), ("Resolve issue #", NOTES)])  # one each
    code, outputs, _, log = runner.run("issues", rewritten("issues", "labeled", issue__number=number,
                                                           label__name="agent"),
                                       {"anthropic_api_key": fake_anthropic.api_key})
    assert code == 0, log
    [pr] = fake_github.pulls(OWNER, NAME)
    uploaded = Path(outputs["transcript_path"])
    named = re.findall(r"\| \[`([^`/]+)/transcript\.md`\]\(([^)]+)\) in the run's artifact \|", pr["body"])
    assert len(named) == 2, pr["body"]  # each attempt's row: its directory in the artifact, and the run
    for directory, link in named:
        assert link == f"{fake_github.web_url}/{REPO}/actions/runs/4242"
        assert (uploaded / directory / "transcript.md").is_file() and (uploaded / directory / "record.json").is_file()
        assert not (uploaded / directory / "clean").exists()  # the attempt's clone is not uploaded
    assert str(uploaded) not in pr["body"]  # no path of the runner's


def test_a_decode_comment_on_a_pull_request_pushes_to_its_branch(runner, fake_github, fake_anthropic):
    fake_github.push_branch(OWNER, NAME, "feature", {"feature.txt": "wip\n"})
    number = fake_github.add_pull(OWNER, NAME, "Feature", "A feature.", head_branch="feature",
                                  base_branch="main", user="alice")
    comment = fake_github.add_comment(OWNER, NAME, number, "/decode add notes", user="alice")
    fake_anthropic.script(NOTES)
    payload = rewritten("issue_comment", "created", issue__number=number, issue__pull_request={"url": "x"},
                        comment__id=comment, comment__body="/decode add notes")
    code, outputs, summary, log = runner.run("issue_comment", payload, {"anthropic_api_key": fake_anthropic.api_key})
    assert code == 0, log
    assert outputs["conclusion"] == "success" and outputs["branch"] == "feature"
    assert len(fake_github.pulls(OWNER, NAME)) == 1
    assert fake_github.file(OWNER, NAME, "feature", "NOTES.md") == "noted\n"
    assert "| turns |" in summary
    first, second = decode_runs(fake_github, OWNER, NAME)  # made with the workflow's token
    assert first["history"][0][0] == "queued" and first["conclusion"] == second["conclusion"] == "success"
    assert second["head_sha"] == fake_github.branch_sha(OWNER, NAME, "feature") and second["app"] == "github-actions"
    assert first["details_url"] == f"{fake_github.web_url}/{REPO}/actions/runs/4242"


def test_a_scheduled_run_with_a_prompt_opens_a_pull_request(runner, fake_github, fake_anthropic):
    fake_anthropic.script(NOTES)
    payload = {"schedule": "17 6 * * 1", "repository": {"full_name": REPO, "name": NAME, "owner": {"login": OWNER}},
               "workflow": ".github/workflows/decode.yml"}
    code, outputs, summary, log = runner.run("schedule", payload, {"anthropic_api_key": fake_anthropic.api_key,
                                                                   "prompt": "Write notes."})
    assert code == 0, log
    [pr] = fake_github.pulls(OWNER, NAME)
    assert pr["head"]["ref"] == "decode/run-4242" and outputs["pr_url"] == pr["html_url"]
    assert "Fixes #" not in pr["body"]
    assert "Write notes." in json.dumps(fake_anthropic.requests[0].body["messages"][0])


def test_a_manual_run_takes_its_prompt_from_the_dispatch_inputs(runner, fake_github, fake_anthropic):
    fake_anthropic.script(NOTES)
    payload = rewritten("workflow_dispatch", None, inputs={"prompt": "Write notes from dispatch."}, ref="refs/heads/main")
    code, outputs, _, log = runner.run("workflow_dispatch", payload, {"anthropic_api_key": fake_anthropic.api_key,
                                                                      "prompt": "the input default"})
    assert code == 0, log
    assert outputs["conclusion"] == "success" and len(fake_github.pulls(OWNER, NAME)) == 1
    assert "Write notes from dispatch." in json.dumps(fake_anthropic.requests[0].body["messages"][0])


@pytest.mark.parametrize("sender, sender_type, why", [("renovate[bot]", "Bot", "bot"),
                                                       ("rita", "User", "read permission")])
def test_bots_and_readers_are_skipped_with_the_reason(runner, fake_github, fake_anthropic, sender, sender_type, why):
    number = fake_github.add_issue(OWNER, NAME, "x", "", user="alice")
    payload = rewritten("issues", "labeled", sender=sender, sender_type=sender_type, issue__number=number,
                        label__name="agent")
    code, outputs, summary, log = runner.run("issues", payload, {"anthropic_api_key": fake_anthropic.api_key})
    assert code == 0, log
    assert outputs["conclusion"] == "skipped" and outputs["pr_url"] == ""
    assert why in summary
    assert not fake_anthropic.requests and not fake_github.pulls(OWNER, NAME)


def test_a_missing_api_key_names_the_input(runner, fake_github):
    number = fake_github.add_issue(OWNER, NAME, "x", "", user="alice")
    code, _, _, log = runner.run("issues", rewritten("issues", "labeled", issue__number=number, label__name="agent"),
                                 {})
    assert code == 2
    assert "decode: the anthropic_api_key input is empty" in log and "Traceback" not in log


def test_the_workflow_files_are_valid(action_validator):
    files = [ROOT / "action.yml", *sorted((ROOT / ".github" / "workflows").glob("*.yml")),
             *sorted((ROOT / "examples" / "workflows").glob("*.yml"))]
    for path in files:
        res = subprocess.run([*action_validator, str(path)], capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, f"{path.name}: {res.stdout}{res.stderr}"
    broken = ROOT / "build" / "broken-workflow.yml"
    broken.parent.mkdir(exist_ok=True)
    broken.write_text("on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    stepz: []\n")
    assert subprocess.run([*action_validator, str(broken)], capture_output=True).returncode != 0


def test_the_example_workflow_subscribes_to_every_kind_of_request_and_says_what_to_set_up():
    """Each event by which a person asks for work reaches the action: a trigger the workflow does not list
    (review batches, before) can never run."""
    workflow = yaml.safe_load((ROOT / "examples" / "workflows" / "decode.yml").read_text())
    on, job = workflow[True], workflow["jobs"]["decode"]  # YAML 1.1 reads the key `on` as True
    for event, action in (("issues", "labeled"), ("issue_comment", "created"),
                          ("pull_request_review_comment", "created"), ("pull_request_review", "submitted")):
        assert f"{event}.{action}" in APP_ROUTES
        assert on[event]["types"] == [action] and f"github.event_name == '{event}'" in job["if"], event
    assert "github.event.review.state == 'changes_requested'" in job["if"]
    default = yaml.safe_load((ROOT / "action.yml").read_text())["inputs"]["timeout_minutes"]["default"]
    assert default == "45" and job["timeout-minutes"] > int(default)
    guide = " ".join((ROOT / "docs" / "action.md").read_text().split())
    assert "Create the `agent` label" in guide and "45 minutes by default" in guide and "review batch" in guide
    assert "create the\n# `agent` label" in (ROOT / "examples" / "workflows" / "decode.yml").read_text()


def test_a_github_failure_still_writes_the_outputs_and_fails_the_step(runner, fake_github, fake_anthropic):
    number = fake_github.add_issue(OWNER, NAME, "x", "", user="alice")
    fake_github.inject("GET", rf"^/repos/{OWNER}/{NAME}$", status=404, times=99)  # e.g. the token lost access
    code, outputs, summary, log = runner.run("issues", rewritten("issues", "labeled", issue__number=number,
                                                                 label__name="agent"),
                                             {"anthropic_api_key": fake_anthropic.api_key})
    assert code == 2 and outputs["conclusion"] == "failed"  # the token's access: a setting to fix
    assert "::error title=decode-bot::" in log and "decode-bot: failed" in summary
    assert "could not finish" in fake_github.comments(OWNER, NAME, number)[0]["body"]
    assert fake_github.token not in log + summary


def test_the_sandbox_hides_the_checkout_temp_and_home_and_gets_the_runners_path():
    env = {"GITHUB_WORKSPACE": "/home/runner/work/r/r", "RUNNER_TEMP": "/home/runner/work/_temp", "HOME": "",
           "PATH": "/opt/hostedtoolcache/node/20.11.0/x64/bin::/usr/bin"}
    assert runner_sandbox(env) == {"sandbox_hide": (Path("/home/runner/work/r/r"), Path("/home/runner/work/_temp")),
                                   "sandbox_path": ("/opt/hostedtoolcache/node/20.11.0/x64/bin", "/usr/bin")}
