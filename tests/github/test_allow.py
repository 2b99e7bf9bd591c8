"""`/decode allow HOST ...`: a run whose egress was refused offers it, and a writer's command opens a pull request
changing only `allow_domains` in decode.yml, edited as text. Through the real path: a bwrap sandbox and its
egress proxy, GitHub's own webhook examples, the fake GitHub and the fake Messages API."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from bot.core.errors import ConfigError
from bot.github.allow import with_hosts
from bot.github.hosts import checked_hosts, offerable
from tests.sandbox.conftest import require
from tests.support.github_job import NAME, OWNER, delivery, run, world  # noqa: F401 (fixture)

CONFIG = """# what the agent may reach
network: false
allow_domains:
  # the package index mirror
  - packages.example.com   # keep this one
allow_workflow_changes: false
"""
PIP = "python3 -m pip install --index-url https://pypi.example/simple/ --retries 0 --timeout 5 tomli 2>&1 | tail -3"


def test_hosts_are_added_as_text_keeping_comments_order_and_the_rest():
    edited = with_hosts(CONFIG, ["pypi.example", "packages.example.com"])
    assert edited == CONFIG.replace("keep this one\n", "keep this one\n  - pypi.example\n")
    flow = "allow_domains: [a.example]  # names\nnetwork: false\n"
    assert with_hosts(flow, ["b.example"]) == "allow_domains: [a.example, b.example]  # names\nnetwork: false\n"
    assert with_hosts("network: false", ["b.example"]) == "network: false\nallow_domains:\n  - b.example\n"
    assert with_hosts("allow_domains: []\n", ["b.example"]) == "allow_domains: [b.example]\n"
    assert with_hosts(CONFIG, ["packages.example.com"]) == CONFIG
    with pytest.raises(ConfigError, match="allow_domains"):
        with_hosts("allow_domains: &names\n  - a.example\nother: *names\n", ["b.example"])


def test_ip_literals_and_metadata_names_are_never_offered_nor_taken():
    blocked = {"pypi.example:80": 2, "169.254.169.254:80": 1, "[fd00:ec2::254]:80": 1, "10.0.0.1:443": 1,
               "metadata.google.internal:80": 1, "files.example.org:443": 3}
    assert offerable(blocked) == ["files.example.org", "pypi.example"]
    assert checked_hosts(["PyPI.example", "pypi.example"]) == ("pypi.example",)
    for bad in ("169.254.169.254", "metadata.google.internal", "localhost", "a b", "x;rm"):
        assert isinstance(checked_hosts([bad]), str), bad


def command(fake, number: int, body: str, sender: str = "alice") -> dict:
    comment_id = fake.add_comment(OWNER, NAME, number, body, user=sender)
    return delivery("issue_comment", "created", sender=sender, issue__number=number, comment__id=comment_id,
                    comment__body=body)


@pytest.mark.bwrap
def test_a_refused_pip_install_offers_allow_and_the_command_opens_a_pull_request_of_decode_yml_only(world):
    require("bwrap")
    fake, anthropic, *_ = world
    fake.push_branch(OWNER, NAME, "main", {".github/decode.yml": CONFIG})
    number = fake.add_issue(OWNER, NAME, "Use tomli", "Install tomli and use it.", user="alice")
    anthropic.script([[{"type": "tool_use", "name": "bash", "input": {"command": PIP}}],
                      [{"type": "tool_use", "name": "bash", "input": {"command": "echo tried > NOTES.md"}}],
                      [{"type": "text", "text": "pip could not reach the index."}]])
    ran = run(world, "issues", delivery("issues", "labeled", issue__number=number, label__name="agent"),
              run_id="needs", sandbox_mode="bwrap")
    assert ran.state == "success", ran.message
    [pr] = fake.pulls(OWNER, NAME)
    tracking = [c["body"] for c in fake.comments(OWNER, NAME, number) if "decode-bot:run:origin:needs" in c["body"]]
    for text in (pr["body"], tracking[0]):
        assert "`/decode allow pypi.example`" in text, text
    main = fake.branch_sha(OWNER, NAME, "main")
    refused = run(world, "issue_comment", command(fake, number, "/decode allow pypi.example", sender="rita"),
                  run_id="rita")
    assert refused.state == "skipped" and len(fake.pulls(OWNER, NAME)) == 1
    assert sum("@rita" in c["body"] for c in fake.comments(OWNER, NAME, number)) == 1
    asked = len(anthropic.requests)
    allowed = run(world, "issue_comment", command(fake, number, "/decode allow pypi.example"), run_id="allow")
    assert allowed.state == "success", allowed.message
    assert len(anthropic.requests) == asked  # no agent
    new = [p for p in fake.pulls(OWNER, NAME) if p["number"] != pr["number"]]
    assert len(new) == 1 and new[0]["base"]["ref"] == "main" and "origin:needs" in new[0]["body"]
    branch = new[0]["head"]["ref"]
    diff = subprocess.run(["git", "diff", main, f"refs/heads/{branch}"], cwd=fake.repo(OWNER, NAME).path,
                          capture_output=True, text=True, check=True).stdout
    assert [line for line in diff.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")] == \
        ["+  - pypi.example"]
    after = fake.file(OWNER, NAME, branch, ".github/decode.yml")
    assert yaml.safe_load(after)["allow_domains"] == ["packages.example.com", "pypi.example"]
    assert "# the package index mirror" in after
    on_pull = run(world, "issue_comment", command(fake, pr["number"], "/decode allow pypi.example"), run_id="on-pr")
    assert on_pull.state == "success", on_pull.message
    [again] = [p for p in fake.pulls(OWNER, NAME) if p["number"] not in (pr["number"], new[0]["number"])]
    assert f"during the run that wrote [this pull request]({pr['html_url']})" in again["body"], \
        "given on the pull request, the command names the run whose pull request offered the hosts"


def test_a_commented_key_and_quoted_items_keep_their_style():
    text = 'allow_domains:   # where the agent may go\n    - "*.files.example.com"\n    - a.example\n\nnetwork: false\n'
    assert with_hosts(text, ["b.example"]) == text.replace("a.example\n", "a.example\n    - b.example\n")
