"""`.github/decode.yml` is trusted only as a regular file committed on the base branch.

A symlink would let the file's content come from somewhere the maintainers did not review as
configuration (or, checked out, from outside the tree); an oversized one is refused before YAML
parsing. Both end the job with a one-line error naming the file, in the tracking comment.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.conftest import git
from tests.support.github_job import NAME, OWNER, delivery, run, world  # noqa: F401 (fixture)


def commit_on_main(fake, change) -> None:
    """Commit on the fake repository's main branch what `change(worktree)` does (links included)."""
    bare = fake.repo(OWNER, NAME).path
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        subprocess.run(["git", "clone", "-q", str(bare), str(work)], check=True, capture_output=True)
        change(work)
        git(work, "add", "-A")
        git(work, "commit", "-qm", "config")
        git(work, "push", "-q", "origin", "HEAD:main")


def symlinked(work):
    (work / "ci").mkdir()
    (work / "ci/decode.yml").write_text("setup:\n  - echo from-the-link\n")
    (work / ".github").mkdir(exist_ok=True)
    (work / ".github/decode.yml").symlink_to("../ci/decode.yml")


def oversized(work):
    (work / ".github").mkdir(exist_ok=True)
    (work / ".github/decode.yml").write_text("setup:\n" + "  - echo padding\n" * 6000)


@pytest.mark.parametrize("change, reason", [(symlinked, "is a symlink"), (oversized, "the limit is 64 KB")])
def test_a_linked_or_oversized_config_ends_the_job_with_a_one_line_error(world, change, reason):
    fake, anthropic, *_ = world
    commit_on_main(fake, change)
    number = fake.add_issue(OWNER, NAME, "Anything", "", user="alice")
    conclusion = run(world, "issues", delivery("issues", "labeled", issue__number=number, label__name="agent"))
    assert conclusion.state == "failed"
    assert reason in conclusion.message and ".github/decode.yml" in conclusion.message
    assert "\n" not in conclusion.message
    assert not anthropic.requests, "the agent ran although the configuration was refused"
    [tracking] = fake.comments(OWNER, NAME, number)
    assert reason in tracking["body"]
