"""The fake GitHub's Git Database API against PyGithub and git: what it makes are real objects a clone sees,
a bot's commit without author or committer is verified and one with them is not, and a ref moves only
forward unless forced. Every route is one of GitHub's (the fake fails a test on any other)."""

from __future__ import annotations

import base64

import pytest
from github import GithubException, InputGitAuthor, InputGitTreeElement

from tests.fakes.test_github import authed, client, git

FILES = {"README.md": "# demo\n", "run.sh": "echo one\n", "src/app.py": "print('app')\n"}


@pytest.fixture
def made(fake_github):
    """demo/app with FILES on main, and PyGithub's view of it as the workflow's bot token."""
    fake_github.add_repo("demo", "app", FILES)
    return fake_github, client(fake_github).get_repo("demo/app")


def new_tree(r, base_sha: str):
    """main's tree with run.sh executable and changed, README.md deleted and a symlink added."""
    script = r.create_git_blob(base64.b64encode(b"#!/bin/sh\necho two\n").decode(), "base64").sha
    link = r.create_git_blob("src/app.py", "utf-8").sha
    return r.create_git_tree([InputGitTreeElement("run.sh", "100755", "blob", sha=script),
                              InputGitTreeElement("README.md", "100644", "blob", sha=None),
                              InputGitTreeElement("app", "120000", "blob", sha=link)],
                             r.get_git_tree(r.get_git_commit(base_sha).tree.sha))


def test_a_bots_commit_without_author_is_verified_and_a_clone_sees_it(made, tmp_path):
    fake, r = made
    main = fake.branch_sha("demo", "app", "main")
    tree = new_tree(r, main)
    commit = r.create_git_commit("Tidy up\n\nCo-authored-by: a <a@example.com>\n", tree, [r.get_git_commit(main)])
    assert commit.raw_data["verification"]["verified"] is True and commit.raw_data["verification"]["reason"] == "valid"
    assert commit.author.name == "github-actions[bot]" and commit.committer.name == "GitHub"
    assert fake.api_commits[commit.sha]["by"] == "github-actions[bot]"
    r.create_git_ref("refs/heads/tidy", commit.sha)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "-b", "tidy", authed(fake.git_url("demo", "app"), fake.token), str(clone))
    assert git(clone, "log", "-1", "--format=%B").stdout == "Tidy up\n\nCo-authored-by: a <a@example.com>\n\n"
    listed = git(clone, "ls-tree", "-r", "HEAD").stdout
    assert "100755 blob" in listed.split("run.sh")[0].splitlines()[-1] and "120000 blob" in listed
    assert not (clone / "README.md").exists() and (clone / "app").is_symlink()
    assert r.get_git_commit(commit.sha).raw_data["verification"]["verified"] is True


def test_a_commit_with_its_own_author_or_a_persons_is_not_verified(made):
    fake, r = made
    main = r.get_git_commit(fake.branch_sha("demo", "app", "main"))
    by_hand = r.create_git_commit("x", main.tree, [main], author=InputGitAuthor("bot", "bot@example.com"))
    assert by_hand.raw_data["verification"]["verified"] is False and by_hand.committer.name == "bot"
    fake.add_user("alice")
    fake.set_permission("demo", "app", "alice", "write")
    alice = client(fake, fake.add_token("alice")).get_repo("demo/app")
    assert alice.create_git_commit("y", main.tree, [main]).raw_data["verification"]["verified"] is False


def test_a_ref_moves_forward_only_unless_forced(made):
    fake, r = made
    main = r.get_git_commit(fake.branch_sha("demo", "app", "main"))
    ahead = r.create_git_commit("ahead", new_tree(r, main.sha), [main])
    aside = r.create_git_commit("aside", main.tree, [])
    ref = r.get_git_ref("heads/main")
    ref.edit(ahead.sha, force=False)
    assert fake.branch_sha("demo", "app", "main") == ahead.sha
    with pytest.raises(GithubException) as refused:
        ref.edit(aside.sha, force=False)
    assert refused.value.status == 422 and "not a fast forward" in str(refused.value.data)
    ref.edit(aside.sha, force=True)
    assert fake.branch_sha("demo", "app", "main") == aside.sha
    with pytest.raises(GithubException) as exists:
        r.create_git_ref("refs/heads/main", ahead.sha)
    assert exists.value.status == 422 and "already exists" in str(exists.value.data)
    with pytest.raises(GithubException) as missing:
        r.get_git_ref("heads/nothing").object
    assert missing.value.status == 404


def test_a_workflow_change_through_the_api_needs_the_workflows_permission(made):
    fake, _ = made
    token = fake.mint_installation_token(None, {"contents": "write"}).value
    r = client(fake, token).get_repo("demo/app")
    main = r.get_git_commit(fake.branch_sha("demo", "app", "main"))
    flow = r.create_git_tree([InputGitTreeElement(".github/workflows/ci.yml", "100644", "blob", content="on: push\n")],
                             r.get_git_tree(main.tree.sha))
    commit = r.create_git_commit("add ci", flow, [main])
    with pytest.raises(GithubException) as refused:
        r.get_git_ref("heads/main").edit(commit.sha)
    assert "without `workflows` permission" in str(refused.value.data)
    assert fake.branch_sha("demo", "app", "main") == main.sha
