"""Signed commits: the run's commit is made through GitHub's Git Database API, as the App or the workflow's
token, so GitHub marks it verified; what the API cannot carry goes by git, with a note. End to end against
the fake GitHub (which writes real objects into its bare repositories) and the fake Messages API."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading

import pytest
import requests

from bot.github.api_commit import read_commit
from bot.github.auth import AppCredentials
from bot.github.forge import GitHubForge
from bot.github.job import JobContext, run_github_job
from bot.github.retry import GitHubRetry
from bot.github.triggers import Router, Rules
from bot.model.anthropic import AnthropicModel
from bot.workspace.clone import BOT_IDENTITY, git_env
from tests.support.publish import bare, finished
from tests.support.github_job import NAME, OWNER, REPO, as_sent, delivery, edit_turns, run, world  # noqa: F401 (fixture)

CO_AUTHOR = "Co-authored-by: alice <alice@users.noreply.github.com>"


def bash(command: str, said: str = "Done.") -> list:
    return [[{"type": "tool_use", "name": "bash", "input": {"command": command}}], [{"type": "text", "text": said}]]


def app_run(world, title: str, turns: list, *, retry: GitHubRetry | None = None) -> tuple[int, dict]:
    """An issue `title` by alice, labeled and run by the App (its installation token) as the server runs it,
    the model answering `turns`: the issue's number and the pull request it ended as."""
    fake, anthropic, settings, _, _ = world
    number = fake.add_issue(OWNER, NAME, title, "", user="alice")
    anthropic.script(turns)
    forge = GitHubForge(AppCredentials(str(fake.app_id), fake.private_key_pem, fake.api_url),
                        retry=retry or GitHubRetry(sleep=lambda s: None))
    payload = delivery("issues", "labeled", issue__number=number, label__name="agent")
    trigger = Router(Rules.of(settings.github)).decide("issues", as_sent(fake, payload))
    conclusion = run_github_job(JobContext(trigger, forge, run_id="app", tag="origin:app",
                                           model=AnthropicModel(settings.model)),
                                settings.replace(github_token=None).job)
    assert conclusion.state == "success", conclusion.message
    [pr] = fake.pulls(OWNER, NAME)
    return number, pr


def git_commit(fake, sha: str) -> dict:
    """GET /repos/{owner}/{repo}/git/commits/{sha}, as anyone who may read the repository sees it."""
    answer = requests.get(f"{fake.api_url}/repos/{REPO}/git/commits/{sha}",
                          headers={"Authorization": f"token {fake.token}"}, timeout=10)
    assert answer.status_code == 200, answer.text
    return answer.json()


def pushes(fake) -> list:
    """The git pushes the fake saw (each begins with the receive-pack advertisement)."""
    return [r for r in fake.requests if r.kind == "git" and r.query.get("service") == "git-receive-pack"]


def tree(fake, sha: str) -> list[str]:
    """`git ls-tree -r` of `sha` in the fake's bare repository: "mode path" lines."""
    out = subprocess.run(["git", "ls-tree", "-r", sha], cwd=fake.repo(OWNER, NAME).path, capture_output=True,
                         text=True, check=True).stdout
    return [f"{line.split()[0]} {line.split(chr(9))[1]}" for line in out.splitlines()]


def test_a_labeled_issue_on_the_app_ends_with_a_verified_commit_made_through_the_api(world):
    fake = world[0]
    _, pr = app_run(world, "Take notes", edit_turns("signed"))
    head = pr["head"]["sha"]
    assert fake.api_commits[head]["by"] == "decode-bot[bot]" and not pushes(fake)
    made = git_commit(fake, head)
    assert made["verification"]["verified"] is True and made["verification"]["reason"] == "valid"
    assert made["author"]["name"] == "decode-bot[bot]" and made["author"]["email"].endswith(
        "+decode-bot[bot]@users.noreply.github.com")
    assert made["message"].rstrip().endswith(CO_AUTHOR)
    # the commit git would have pushed: the base's tree and the diff, the message the bot writes, on the base
    base = fake.branch_sha(OWNER, NAME, "main")
    assert [p["sha"] for p in made["parents"]] == [base]
    assert tree(fake, head) == sorted(tree(fake, base) + ["100644 NOTES.md"], key=lambda line: line.split()[1])
    assert made["message"] == f"decode: Take notes\n\nAdded signed.\n\n{CO_AUTHOR}\n"
    assert fake.file(OWNER, NAME, pr["head"]["ref"], "NOTES.md") == "signed\n"


def test_modes_links_and_deletions_arrive_and_a_clone_sees_them(world, tmp_path):
    fake = world[0]
    _, pr = app_run(world, "Tidy up", bash("printf '#!/bin/sh\\necho hi\\n' > run.sh && chmod +x run.sh && "
                                         "rm README.md && ln -s calendar_utils.py utils.py && "
                                         "chmod +x calendar_utils.py"))
    head = pr["head"]["sha"]
    assert fake.api_commits[head]["signed"]
    listed = tree(fake, head)
    assert "100755 run.sh" in listed and "100755 calendar_utils.py" in listed and "120000 utils.py" in listed
    assert not [line for line in listed if line.endswith(" README.md")]
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "-b", pr["head"]["ref"], fake.git_url(OWNER, NAME), str(clone)],
                   env=git_env(fake.token), check=True, capture_output=True)
    assert (clone / "run.sh").stat().st_mode & 0o111 and (clone / "utils.py").is_symlink()
    assert not (clone / "README.md").exists()


BIG_CHANGE = ("mkdir -p gen && for i in $(seq {n}); do printf 'line %s\\n' $i > gen/f$i.txt; done && "
              "printf '#!/bin/sh\\necho hi\\n' > run.sh && chmod +x run.sh && ln -s calendar_utils.py utils.py && "
              "rm README.md && printf '\\211PNG\\0\\377' > logo.png")


def git_data_writes(fake) -> list:
    """The content-creating requests of the Git Database API (blobs, trees, commits, refs) the fake saw."""
    return [r for r in fake.writes() if "/git/" in r.path]


@pytest.mark.parametrize("n", [300, 1000])
def test_a_change_of_many_files_is_one_verified_commit_in_a_few_requests_none_refused(world, n):
    fake = world[0]
    fake.limit_writes(80, 60.0)  # GitHub's secondary limit on content creation
    _, pr = app_run(world, "Generate", bash(BIG_CHANGE.format(n=n)))
    head = pr["head"]["sha"]
    assert fake.api_commits[head]["signed"] and git_commit(fake, head)["verification"]["verified"]
    listed = tree(fake, head)
    assert len([line for line in listed if " gen/" in line]) == n
    assert {"100755 run.sh", "120000 utils.py", "100644 logo.png"} <= set(listed) and "100644 README.md" not in listed
    made = git_data_writes(fake)  # the binary logo as a blob, every text file inline in one tree, commit, ref
    assert [(r.method, r.path.rsplit("/git/", 1)[1].split("/")[0]) for r in made] == \
        [("POST", "blobs"), ("POST", "trees"), ("POST", "commits"), ("POST", "refs")]
    assert not [r for r in fake.requests if r.status in (403, 429)]  # none refused
    assert not pushes(fake)


def test_the_commit_is_read_from_git_in_one_cat_file_process(tmp_path, monkeypatch):
    ran = finished(bare(tmp_path / "base.git"), tmp_path / "run", branch="decode/x",
                   change={f"gen/f{i}.txt": f"{i}\n" for i in range(200)})
    log, bin_dir = tmp_path / "git.log", tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "git").write_text(f'#!/bin/sh\necho "$1" >> {log}\nexec {shutil.which("git")} "$@"\n')
    (bin_dir / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")  # every git the workspace runs, logged
    new = read_commit(ran.workspace, ran.result.commit)
    assert not isinstance(new, str) and len(new.entries) == 200
    ran_git = log.read_text().split()
    assert ran_git.count("cat-file") == 1 and len(ran_git) <= 4, ran_git


def test_a_file_over_the_api_limit_goes_by_git_with_a_note(world):
    fake = world[0]
    number, pr = app_run(world, "Add the fixture", bash("head -c 21000000 /dev/zero > big.bin"))
    head = pr["head"]["sha"]
    assert head not in fake.api_commits and pushes(fake)
    made = git_commit(fake, head)
    assert made["verification"]["verified"] is False
    assert (made["author"]["name"], made["author"]["email"]) == BOT_IDENTITY
    assert made["message"].rstrip().endswith(CO_AUTHOR)
    note = "**Unsigned commit:** pushed with git"
    assert note in pr["body"] and "`big.bin` is 20.0 MB, over the 20 MB" in pr["body"]
    assert note in fake.comments(OWNER, NAME, number)[0]["body"]


def test_the_workflow_token_makes_the_commit_on_a_pull_requests_branch_through_the_api(world):
    fake, anthropic, *_ = world
    fake.push_branch(OWNER, NAME, "feature", {"feature.txt": "wip\n"})
    before = fake.branch_sha(OWNER, NAME, "feature")
    number = fake.add_pull(OWNER, NAME, "Feature", "A feature.", head_branch="feature", base_branch="main",
                           user="alice")
    comment = fake.add_comment(OWNER, NAME, number, "/decode add notes", user="alice")
    anthropic.script(edit_turns("on the branch"))
    conclusion = run(world, "issue_comment", delivery(
        "issue_comment", "created", issue__number=number, issue__pull_request={"url": "x"}, comment__id=comment,
        comment__body="/decode add notes"))
    assert conclusion.state == "success", conclusion.message
    head = fake.branch_sha(OWNER, NAME, "feature")
    assert fake.api_commits[head] | {"at": ""} == {"repo": REPO, "by": "github-actions[bot]", "at": "",
                                                  "signed": True}
    made = git_commit(fake, head)
    assert [p["sha"] for p in made["parents"]] == [before] and made["verification"]["verified"]
    listed = requests.get(f"{fake.api_url}/repos/{REPO}/pulls/{number}/commits", timeout=10,
                          headers={"Authorization": f"token {fake.token}"}).json()
    assert [c["commit"]["verification"]["verified"] for c in listed] == [False, True]  # the person's, ours
    assert head[:12] in conclusion.message and not pushes(fake)
    # a PATCH that only moves the branch forward: no force
    [patch] = [r for r in fake.requests if r.method == "PATCH" and "/git/refs/heads/feature" in r.path]
    assert patch.body == {"sha": head, "force": False}


def test_the_commit_read_for_the_api_is_what_git_committed_and_what_it_cannot_carry_is_named(tmp_path):
    ran = finished(bare(tmp_path / "base.git"), tmp_path / "run", branch="decode/x",
                   change={"calendar.py": "x = 1\n", "big.txt": "y" * 3000})
    ws, commit = ran.workspace, ran.result.commit
    new = read_commit(ws, commit)
    assert not isinstance(new, str) and new.parent == ws.base_sha
    assert {(e.path, e.mode, e.content) for e in new.entries} == {("calendar.py", "100644", b"x = 1\n"),
                                                                  ("big.txt", "100644", b"y" * 3000)}
    assert new.message == "Weekend check\n\nCo-authored-by: alice <alice@users.noreply.github.com>\n"
    assert new.tree == ws.git("rev-parse", f"{commit}^{{tree}}").decode().strip()
    assert read_commit(ws, commit, limit=2048) == \
        "`big.txt` is 0.0 MB, over the 0 MB decode-bot sends through the API"
    (ws.clean / "more.txt").write_text("more\n")
    ws.git("add", "--", "more.txt")
    second = ws.commit("second")
    assert read_commit(ws, second) == "the commit is not one commit on top of the run's base"


def test_a_pull_requests_branch_that_moved_on_meanwhile_is_never_overwritten(world):
    fake, anthropic, *_ = world
    fake.push_branch(OWNER, NAME, "feature", {"feature.txt": "wip\n"})
    number = fake.add_pull(OWNER, NAME, "Feature", "A feature.", head_branch="feature", base_branch="main",
                           user="alice")
    comment = fake.add_comment(OWNER, NAME, number, "/decode add notes", user="alice")
    anthropic.script(edit_turns("late"))
    gate = fake.pause("POST", rf"^/repos/{REPO}/git/trees$")

    def someone_pushes() -> None:
        gate.reached.wait(120)
        fake.push_branch(OWNER, NAME, "feature", {"theirs.txt": "mine\n"}, start="feature")
        gate.release(drop=False)
    pusher = threading.Thread(target=someone_pushes)
    pusher.start()
    conclusion = run(world, "issue_comment", delivery(
        "issue_comment", "created", issue__number=number, issue__pull_request={"url": "x"}, comment__id=comment,
        comment__body="/decode add notes"))
    pusher.join()
    assert conclusion.state == "failed" and "pushing feature failed" in conclusion.message
    refused = [r for r in fake.requests if r.method == "PATCH" and "/git/refs/heads/feature" in r.path]
    assert [(r.status, r.body["force"]) for r in refused] == [(422, False)] and pushes(fake)  # then git, refused
    assert fake.file(OWNER, NAME, "feature", "theirs.txt") == "mine\n"
