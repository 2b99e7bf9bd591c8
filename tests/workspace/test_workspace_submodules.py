"""Submodules: checked out in both clones when the host can fetch them, never carried back by the hand-back.

Real git repositories, the real agentd behind a local sandbox, and a real HTTP remote.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bot.sandbox import HandBack
from bot.workspace.clone import Workspace, git_env, prepare
from tests.conftest import GIT_ENV, git, make_repo
from tests.fakes.git_http import GitHttpServer
from tests.support.hand_back import hand_back

TOKEN = "ghs_" + "T0kenT0ken" * 4
REASON = "changes inside the submodule vendor/lib are not carried (decode-bot commits to this repository only)"


def add_submodule(repo: Path, url: str, path: str) -> None:
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", url, path)
    git(repo, "commit", "-q", "-m", f"add {path}")


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    """A repository with the submodule vendor/lib, which has the submodule deep of its own."""
    deep = make_repo(tmp_path / "deep", {"deep.txt": "deep\n"})
    lib = make_repo(tmp_path / "lib", {"lib.txt": "lib\n"})
    add_submodule(lib, str(deep), "deep")
    top = make_repo(tmp_path / "top", {"README.md": "# top\n"})
    add_submodule(top, str(lib), "vendor/lib")
    return top


@pytest.fixture
def ws(origin: Path, tmp_path: Path) -> Workspace:
    return prepare(str(origin), tmp_path / "run", "decode/run-1")


def inodes(path: Path) -> set[int]:
    return {p.stat().st_ino for p in path.rglob("*") if p.is_file()}


def test_both_clones_have_the_submodules_and_share_no_files(ws: Workspace) -> None:
    assert ws.notes == []
    for clone in (ws.clean, ws.path):
        assert (clone / "vendor/lib/lib.txt").read_text() == "lib\n"
        assert (clone / "vendor/lib/deep/deep.txt").read_text() == "deep\n"
        assert git(clone, "submodule", "status", "--recursive").count("+") == 0
    assert not inodes(ws.clean / ".git" / "modules") & inodes(ws.path / ".git" / "modules")
    assert git(ws.path / "vendor/lib", "remote") == "" and git(ws.path / "vendor/lib/deep", "remote") == ""
    assert str(ws.clean) not in (ws.path / ".git" / "config").read_text()


@pytest.mark.parametrize("script", [
    "echo more >> vendor/lib/lib.txt",
    "echo new > vendor/lib/new.txt",
    "rm vendor/lib/lib.txt",
    "echo more >> vendor/lib/deep/deep.txt",
    "cd vendor/lib && git commit -q --allow-empty -m 'only a commit'",
    "cd vendor/lib/deep && echo x > x && git add x && git commit -q -m x",
    "rm -rf vendor/lib",
])
def test_a_change_inside_a_submodule_is_left_out_and_the_rest_committed(ws: Workspace, script: str) -> None:
    hand = hand_back(ws, f"{script}; cd {ws.path} && echo fix > fix.txt")
    assert hand.left_out == {"vendor/lib": REASON} and b"vendor/lib" not in hand.patch
    applied = ws.apply_patch(hand.patch)
    assert applied.changed == ["fix.txt"] and applied.left_out == {}
    sha = ws.commit("fix")
    assert git(ws.clean, "show", "--name-only", "--format=", sha) == "fix.txt"
    assert git(ws.clean, "rev-parse", f"{sha}:vendor/lib") == git(ws.clean, "rev-parse", f"{ws.base_sha}:vendor/lib")


def test_an_untouched_submodule_is_no_change(ws: Workspace) -> None:
    hand = hand_back(ws, "cd vendor/lib && git status >/dev/null")
    assert hand == HandBack(b"", {})


def test_nothing_planted_in_a_submodule_runs_during_the_hand_back(ws: Workspace, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    trap = f"#!/bin/sh\ntouch {marker}\n"
    for gitdir in (ws.path / ".git/modules/vendor/lib", ws.path / ".git/modules/vendor/lib/modules/deep"):
        (gitdir / "hooks").mkdir(exist_ok=True)
        for name in ("pre-commit", "post-checkout", "post-index-change", "reference-transaction", "fsmonitor"):
            (gitdir / "hooks" / name).write_text(trap)
            (gitdir / "hooks" / name).chmod(0o755)
        git(gitdir, "config", "core.fsmonitor", str(gitdir / "hooks" / "fsmonitor"))
        git(gitdir, "config", "core.hooksPath", str(gitdir / "hooks"))
    (ws.path / "vendor/lib/.gitattributes").write_text("* filter=evil\n")
    git(ws.path / ".git/modules/vendor/lib", "config", "filter.evil.clean", f"touch {marker}; cat")
    hand = hand_back(ws, "echo fix > fix.txt")
    assert not marker.exists()
    assert hand.left_out == {"vendor/lib": REASON}  # the new .gitattributes is a change inside it
    subprocess.run(["git", "add", "-A"], cwd=ws.path / "vendor/lib", env=GIT_ENV, capture_output=True)
    assert marker.exists(), "the plants are live for anyone running git in the submodule"


def test_a_submodule_the_host_cannot_fetch_is_noted_and_the_run_goes_on(tmp_path: Path) -> None:
    top = make_repo(tmp_path / "top", {"README.md": "# top\n"})
    add_submodule(top, str(make_repo(tmp_path / "gone", {"a.txt": "a\n"})), "vendor/lib")
    subprocess.run(["rm", "-rf", str(tmp_path / "gone")], check=True)
    ws = prepare(str(top), tmp_path / "run", "decode/run-1")
    assert len(ws.notes) == 1 and ws.notes[0].startswith("the submodule vendor/lib could not be checked out")
    assert (ws.path / "vendor/lib").is_dir() and not any((ws.path / "vendor/lib").iterdir())
    assert hand_back(ws, "true") == HandBack(b"", {})
    hand = hand_back(ws, "echo mine > vendor/lib/a.txt && echo fix > fix.txt")
    assert hand.left_out == {"vendor/lib": REASON}
    assert ws.apply_patch(hand.patch).changed == ["fix.txt"]


def test_over_http_the_token_reaches_the_repository_host_only_and_local_paths_are_not_fetched(
    tmp_path: Path
) -> None:
    served = tmp_path / "served"
    lib = make_repo(tmp_path / "lib", {"lib.txt": "lib\n"})
    secret = make_repo(tmp_path / "secret", {"secret.txt": "host file\n"})
    subprocess.run(["git", "clone", "-q", "--bare", str(lib), str(served / "o" / "lib.git")], check=True,
                   env=git_env(local=True))
    top = make_repo(tmp_path / "top", {"README.md": "# top\n"})
    git(top, "remote", "add", "origin", str(served / "o" / "top.git"))
    add_submodule(top, "../lib.git", "vendor/lib")  # relative: served next to the repository
    add_submodule(top, str(secret), "vendor/secret")  # a host path: never fetched for a remote repository
    subprocess.run(["git", "clone", "-q", "--bare", str(top), str(served / "o" / "top.git")], check=True,
                   env=git_env(local=True))
    with GitHttpServer(served, password=TOKEN) as server:
        ws = prepare(server.url + "o/top.git", tmp_path / "run", "decode/run-1", token=TOKEN)
    assert (ws.path / "vendor/lib/lib.txt").read_text() == "lib\n"
    assert not any((ws.path / "vendor/secret").iterdir()) and not (ws.clean / "vendor/secret").exists()
    assert len(ws.notes) == 1 and "vendor/secret" in ws.notes[0] and TOKEN not in ws.notes[0]
    assert any(r["path"].startswith("/o/lib.git") and r["authorization"] for r in server.requests)
    env = git_env(TOKEN, token_scope=server.url)
    assert f"http.{server.url}.extraHeader" in env.values()
    assert "http.extraHeader" not in env.values()
