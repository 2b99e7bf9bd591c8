"""The workflows a user copies: the minimal one inline in README.md and those of examples/workflows/. Each is
used as it stands: the published action (`decode-bot/decode-bot@v1`), only inputs action.yml has, no schedule
unless the file is the scheduled example, a job `if:` that lets a request through and keeps bots out, and the
README's, run through the Actions runner emulation, turns a labeled issue into a pull request."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
import yaml

from tests.support.action import (EXAMPLE, NAME, OWNER, ROOT, action_validator, job_runs, rewritten,  # noqa: F401
                                  runner, runner_temp)  # (fixtures)

PUBLISHED = "decode-bot/decode-bot@v1"
INPUTS = set(yaml.safe_load((ROOT / "action.yml").read_text())["inputs"])
EXAMPLES = sorted((ROOT / "examples" / "workflows").glob("*.yml"))


def readme_workflow() -> str:
    """The README's inline workflow: its fenced yaml block that uses the action."""
    blocks = re.findall(r"^```yaml\n(.*?)^```", (ROOT / "README.md").read_text(), re.S | re.M)
    found = [b for b in blocks if f"uses: {PUBLISHED}" in b]
    assert len(found) == 1, "README.md has no (or more than one) yaml block that uses the action"
    return found[0]


def copies() -> list[tuple[str, str]]:
    return [("README.md", readme_workflow()), *[(f"examples/workflows/{p.name}", p.read_text()) for p in EXAMPLES]]


def action_steps(workflow: dict) -> list[dict]:
    return [s for job in workflow["jobs"].values() for s in job["steps"] if "decode-bot" in s.get("uses", "")]


@pytest.mark.parametrize("name, text", copies(), ids=[name for name, _ in copies()])
def test_a_copied_workflow_uses_the_published_action_with_inputs_it_has(name, text):
    workflow = yaml.safe_load(text)
    steps = action_steps(workflow)
    assert steps, name
    for step in steps:
        assert step["uses"] == PUBLISHED, name
        assert set(step.get("with", {})) <= INPUTS, f"{name}: inputs action.yml lacks: {set(step['with']) - INPUTS}"
        assert step["with"]["anthropic_api_key"] == "${{ secrets.ANTHROPIC_API_KEY }}", name
    on = workflow[True]  # YAML 1.1 reads the key `on` as True
    assert ("schedule" in on) == name.endswith("scheduled.yml"), f"{name}: a schedule makes paid runs by itself"
    assert not any("actions/checkout" in s.get("uses", "") for j in workflow["jobs"].values() for s in j["steps"])


def test_the_projects_own_workflow_is_the_example_but_for_running_the_action_from_its_checkout():
    own = yaml.safe_load((ROOT / ".github" / "workflows" / "decode.yml").read_text())
    example = yaml.safe_load((ROOT / "examples" / "workflows" / "decode.yml").read_text())
    own_steps, example_steps = own["jobs"]["decode"].pop("steps"), example["jobs"]["decode"].pop("steps")
    assert own == example
    assert [s.get("uses") for s in own_steps] == ["actions/checkout@v4", "./", "actions/upload-artifact@v4"]
    assert own_steps[1:] == [{**example_steps[0], "uses": "./"}, *example_steps[1:]]
    assert "NOT the one to copy" in (ROOT / ".github" / "workflows" / "decode.yml").read_text()


ASKED = [(name, text) for name, text in copies() if "schedule" not in yaml.safe_load(text)[True]]


@pytest.mark.parametrize("name, text", ASKED, ids=[name for name, _ in ASKED])
def test_the_job_runs_for_a_label_or_a_command_and_never_for_a_bot_or_a_plain_comment(name, text):
    [condition] = [job["if"] for job in yaml.safe_load(text)["jobs"].values()]
    labeled = rewritten("issues", "labeled", label__name="agent")
    assert job_runs(condition, "issues", labeled)
    assert not job_runs(condition, "issues", rewritten("issues", "labeled", label__name="bug"))
    command = rewritten("issue_comment", "created", comment__body="/decode add a test")
    assert job_runs(condition, "issue_comment", command)
    assert not job_runs(condition, "issue_comment", rewritten("issue_comment", "created", comment__body="thanks!"))
    from_bot = rewritten("issue_comment", "created", sender="ci[bot]", sender_type="Bot", comment__body="/decode x")
    assert not job_runs(condition, "issue_comment", from_bot)
    if "pull_request_review" in yaml.safe_load(text)[True]:  # review batches, and a review asking for changes
        for body, state, runs in (("/decode tidy", "commented", True), (None, "changes_requested", True),
                                  ("LGTM", "approved", False)):
            review = rewritten("pull_request_review", "submitted", review__body=body, review__state=state)
            assert job_runs(condition, "pull_request_review", review) == runs, (body, state)


def test_the_readmes_workflow_as_the_runner_runs_it_turns_a_labeled_issue_into_a_pull_request(
        runner, fake_github, fake_anthropic):
    [step] = action_steps(yaml.safe_load(readme_workflow()))
    number = fake_github.add_issue(OWNER, NAME, "Weekend check is wrong", "Saturdays count as workdays.",
                                   user="alice")
    fake_anthropic.script(json.loads((EXAMPLE / "session.json").read_text())["turns"])
    runner.secrets = {"ANTHROPIC_API_KEY": fake_anthropic.api_key}
    code, outputs, _, log = runner.run("issues", rewritten("issues", "labeled", issue__number=number,
                                                           label__name="agent"), step["with"])
    assert code == 0, log
    [pr] = fake_github.pulls(OWNER, NAME)
    assert outputs["pr_url"] == pr["html_url"] and outputs["conclusion"] == "success"


def test_the_scheduled_example_as_the_runner_runs_it_opens_a_pull_request_with_its_prompt_and_cap(
        runner, fake_github, fake_anthropic):
    workflow = yaml.safe_load((ROOT / "examples" / "workflows" / "scheduled.yml").read_text())
    [step] = action_steps(workflow)
    fake_anthropic.script([[{"type": "tool_use", "name": "bash", "input": {"command": "echo fixed >> NOTES.md"}}],
                           [{"type": "text", "text": "Fixed one slow test."}]])
    runner.secrets = {"ANTHROPIC_API_KEY": fake_anthropic.api_key}
    payload = {"schedule": workflow[True]["schedule"][0]["cron"], "workflow": ".github/workflows/scheduled.yml",
               "repository": {"full_name": f"{OWNER}/{NAME}", "name": NAME, "owner": {"login": OWNER}}}
    code, outputs, summary, log = runner.run("schedule", payload, step["with"])
    assert code == 0, log
    [pr] = fake_github.pulls(OWNER, NAME)
    assert outputs["pr_url"] == pr["html_url"] and pr["head"]["ref"] == "decode/run-4242"
    assert step["with"]["prompt"] in json.dumps(fake_anthropic.requests[0].body["messages"][0])
    assert float(step["with"]["max_cost_usd"]) <= 2


def test_the_readmes_workflow_is_valid(action_validator, tmp_path):
    path = tmp_path / "decode.yml"
    path.write_text(readme_workflow())
    res = subprocess.run([*action_validator, str(path)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
