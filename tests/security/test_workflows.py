"""Workflow files run with the repository's secrets once pushed, so the agent's changes under
`.github/workflows/` are left out of its commit unless the base branch's decode.yml allows them."""

from __future__ import annotations

import subprocess

import pytest

from tests.support.github_job import NAME, OWNER, delivery, run, world  # noqa: F401 (fixture)

WRITE_WORKFLOW = [
    [{"type": "tool_use", "name": "bash", "input": {"command": (
        "mkdir -p .github/workflows && printf 'on: push\\njobs: {}\\n' > .github/workflows/exfil.yml"
        " && echo fixed > NOTES.md")}}],
    [{"type": "text", "text": "Fixed, and added a helpful workflow."}],
]


def labeled(world, **settings):
    fake, anthropic, *_ = world
    number = fake.add_issue(OWNER, NAME, "Fix it", "", user="alice")
    anthropic.script(WRITE_WORKFLOW)
    return number, run(world, "issues", delivery("issues", "labeled", issue__number=number, label__name="agent"),
                       **settings)


def test_workflow_changes_are_left_out_and_named_in_the_pull_request(world):
    fake, *_ = world
    number, conclusion = labeled(world)
    assert conclusion.state == "success", conclusion.message
    [pr] = fake.pulls(OWNER, NAME)
    branch = pr["head"]["ref"]
    assert fake.file(OWNER, NAME, branch, "NOTES.md") == "fixed\n"
    with pytest.raises(subprocess.CalledProcessError):
        fake.file(OWNER, NAME, branch, ".github/workflows/exfil.yml")
    assert "Left out of the commit" in pr["body"] and "`.github/workflows/exfil.yml`" in pr["body"]
    assert "allow_workflow_changes: true" in pr["body"]


def test_allowed_workflow_changes_without_the_permission_fail_with_what_to_grant(world):
    fake, *_ = world
    fake.push_branch(OWNER, NAME, "main", {".github/decode.yml": "allow_workflow_changes: true\n"})
    number, conclusion = labeled(world)  # the Actions-style token, which may never write workflows
    assert conclusion.state == "failed"
    assert "Workflows: write" in conclusion.message and "exfil.yml" in conclusion.message
    assert not fake.pulls(OWNER, NAME)
    assert "Workflows: write" in fake.comments(OWNER, NAME, number)[0]["body"]
