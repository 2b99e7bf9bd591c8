"""A maintainer's `/decode` on a pull request from a fork: the fork is untrusted code.

Driven through the real path (webhook example -> trigger -> job -> real git over the fake GitHub's
smart HTTP -> a real isolating sandbox -> publish). The fork's head carries its own
`.github/decode.yml` with setup commands and a new workflow; neither may take effect, and no branch
of the base repository may ever hold the fork's commits.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from bot.github.auth import AppCredentials
from bot.github.forge import GitHubForge
from bot.github.job import JobContext, run_github_job
from bot.github.retry import GitHubRetry
from bot.model.anthropic import AnthropicModel
from bot.github.triggers import Router, Rules
from tests.support.github_job import NAME, OWNER, delivery, edit_turns, run, world  # noqa: F401 (fixture)
from tests.sandbox.conftest import ISOLATED, require

FORK_CONFIG = "setup:\n  - echo FORK-SETUP-RAN > fork-setup.txt\nnetwork: true\n"
FORK_WORKFLOW = "on: push\njobs:\n  steal:\n    runs-on: ubuntu-latest\n    steps:\n      - run: env\n"
BASE_CONFIG = "setup:\n  - echo base-setup-ran\n"


def fork_pull(fake, *, maintainer_can_modify: bool) -> tuple[int, str]:
    """A fork of octo/calendar whose PR head adds its own decode.yml and a workflow; (number, head sha)."""
    fake.push_branch(OWNER, NAME, "main", {".github/decode.yml": BASE_CONFIG})
    fake.add_fork(OWNER, NAME, "mallory")
    head = fake.push_branch("mallory", NAME, "patch-1", {
        ".github/decode.yml": FORK_CONFIG, ".github/workflows/steal.yml": FORK_WORKFLOW, "fork.txt": "hi\n"})
    number = fake.add_pull(OWNER, NAME, "Fork change", "Please merge.", head_branch="patch-1", base_branch="main",
                           user="mallory", head_repo=("mallory", NAME), maintainer_can_modify=maintainer_can_modify)
    return number, head


def decode_comment(world, number: int, *, forge=None, **settings):
    fake, anthropic, base_settings, default_forge, _ = world
    comment_id = fake.add_comment(OWNER, NAME, number, "/decode add notes", user="alice")
    payload = delivery("issue_comment", "created", issue__number=number, issue__pull_request={"url": "x"},
                       comment__id=comment_id, comment__body="/decode add notes")
    if forge is None:
        return run(world, "issue_comment", payload, **settings)
    s = base_settings.replace(**settings)
    work = Router(Rules.of(s.github)).decide("issue_comment", payload)
    return run_github_job(JobContext(work, forge, run_id="fork", tag="origin:fork",
                                     model=AnthropicModel(s.model, sleep=lambda _: None)), s.job)


def app_forge(fake) -> GitHubForge:
    """The GitHub App's forge: installation tokens, which may push to a fork whose PR allows maintainer edits."""
    return GitHubForge(AppCredentials(str(fake.app_id), fake.private_key_pem, fake.api_url),
                       retry=GitHubRetry(sleep=lambda s: None))


def base_branches_holding(fake, commit: str) -> list[str]:
    """Branches of the base repository that contain `commit`."""
    bare = fake.repo(OWNER, NAME).path
    out = subprocess.run(["git", "branch", "--contains", commit, "--format=%(refname:short)"], cwd=bare,
                         capture_output=True, text=True)
    return out.stdout.split()


def setup_commands(world) -> list[str]:
    events = [json.loads(line) for p in Path(world[2].store.data_dir).rglob("transcript.jsonl")
              for line in p.read_text().splitlines()]
    return [e["command"] for e in events if e["type"] == "setup"]


@pytest.mark.parametrize("mode", ISOLATED)
def test_maintainer_edits_allowed_the_commit_lands_on_the_fork_branch_only(world, mode):
    require(mode)
    fake, anthropic, *_ = world
    number, head = fork_pull(fake, maintainer_can_modify=True)
    anthropic.script(edit_turns("from a maintainer"))
    conclusion = decode_comment(world, number, forge=app_forge(fake), sandbox_mode=mode)
    assert conclusion.state == "success", conclusion.message
    new_head = fake.branch_sha("mallory", NAME, "patch-1")
    assert new_head != head and fake.file("mallory", NAME, "patch-1", "NOTES.md") == "from a maintainer\n"
    parent = subprocess.run(["git", "rev-parse", f"{new_head}^"], cwd=fake.repo("mallory", NAME).path,
                            capture_output=True, text=True).stdout.strip()
    assert parent == head, "only the agent's one commit is added to the fork's branch"
    assert base_branches_holding(fake, head) == [], "a base-repository branch holds the fork's commits"
    assert len(fake.pulls(OWNER, NAME)) == 1, "no new pull request in the base repository"
    assert setup_commands(world) == ["echo base-setup-ran"], "the fork's setup ran"
    with pytest.raises(subprocess.CalledProcessError):
        fake.file("mallory", NAME, "patch-1", "fork-setup.txt")
    reply = fake.comments(OWNER, NAME, number)[-1]["body"]
    assert "mallory/calendar:patch-1" in reply and head[:12] in reply


def test_maintainer_edits_not_allowed_the_change_comes_back_as_a_patch(world):
    require("bwrap")
    fake, anthropic, *_ = world
    number, head = fork_pull(fake, maintainer_can_modify=False)
    anthropic.script(edit_turns("as a patch"))
    conclusion = decode_comment(world, number, forge=app_forge(fake), sandbox_mode="bwrap")
    assert conclusion.state == "success", conclusion.message
    assert fake.branch_sha("mallory", NAME, "patch-1") == head
    assert base_branches_holding(fake, head) == [] and len(fake.pulls(OWNER, NAME)) == 1
    reply = fake.comments(OWNER, NAME, number)[-1]["body"]
    assert "does not allow edits by maintainers" in reply and "git am decode.patch" in reply
    assert head[:12] in reply and "+as a patch" in reply
    assert_patch_applies(fake, reply, head)


def test_a_token_that_cannot_push_to_the_fork_falls_back_to_a_patch(world):
    require("bwrap")
    fake, anthropic, *_ = world
    number, head = fork_pull(fake, maintainer_can_modify=True)
    anthropic.script(edit_turns("workflow token"))
    conclusion = decode_comment(world, number, sandbox_mode="bwrap")  # the Actions-style token
    assert conclusion.state == "success", conclusion.message
    assert fake.branch_sha("mallory", NAME, "patch-1") == head and base_branches_holding(fake, head) == []
    reply = fake.comments(OWNER, NAME, number)[-1]["body"]
    assert "GitHub refused the push" in reply and "git am decode.patch" in reply
    assert fake.token not in reply


def test_local_mode_refuses_a_fork_politely_and_runs_nothing(world):
    fake, anthropic, *_ = world
    number, head = fork_pull(fake, maintainer_can_modify=True)
    conclusion = decode_comment(world, number, sandbox_mode="local")
    assert conclusion.state == "skipped"
    assert not anthropic.requests and not setup_commands(world)
    reply = fake.comments(OWNER, NAME, number)[-1]["body"]
    assert "fork" in reply and "isolating sandbox" in reply and "SANDBOX_MODE=local" in reply
    assert fake.branch_sha("mallory", NAME, "patch-1") == head and len(fake.pulls(OWNER, NAME)) == 1


def assert_patch_applies(fake, reply: str, head: str) -> None:
    """Follow the reply's instructions: the patch in it applies with `git am` on the fork's head."""
    start = reply.index("```diff\n") + len("```diff\n")
    patch = reply[start:reply.index("\n```", start)] + "\n"
    work = Path(fake.root) / "apply-check"
    env = {"GIT_AUTHOR_NAME": "m", "GIT_AUTHOR_EMAIL": "m@x", "GIT_COMMITTER_NAME": "m",
           "GIT_COMMITTER_EMAIL": "m@x", "PATH": "/usr/bin:/bin", "GIT_CONFIG_GLOBAL": "/dev/null"}
    subprocess.run(["git", "clone", "-q", "-b", "patch-1", str(fake.repo("mallory", NAME).path), str(work)],
                   check=True, env=env)
    subprocess.run(["git", "am", "-q"], cwd=work, input=patch.encode(), check=True, env=env)
    assert (work / "NOTES.md").read_text() == "as a patch\n"


def test_a_failed_run_on_a_fork_says_it_failed_before_where_its_work_went(world):
    require("bwrap")
    fake, anthropic, *_ = world
    number, head = fork_pull(fake, maintainer_can_modify=True)
    anthropic.script(edit_turns("half done"))
    anthropic.inject(529, retry_after_ms=1, at=1)  # the edit is made; every retry of the next turn fails
    conclusion = decode_comment(world, number, forge=app_forge(fake), sandbox_mode="bwrap")
    assert conclusion.state == "failed"
    assert fake.file("mallory", NAME, "patch-1", "NOTES.md") == "half done\n"
    reply = conclusion.message
    assert reply.startswith("❌ decode-bot failed:") and "Pushed partial work" not in reply
    assert "The work so far" in reply and "mallory/calendar:patch-1" in reply
