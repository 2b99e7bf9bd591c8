"""The host's clean clone and the sandbox's copy, with real git, a real sandbox and a real HTTP remote."""

from __future__ import annotations

import base64
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.core.errors import DecodeError
from bot.sandbox import SandboxSpec, open_sandbox
from bot.workspace.clone import Workspace, git_env, prepare
from bot.workspace.patch_check import WORKFLOW_REASON, PatchRefused
from tests.conftest import git
from tests.fakes.git_http import GitHttpServer

TOKEN = "ghs_" + "T0kenT0ken" * 4
FILES = {"README.md": "# demo\n", "old.txt": "to be deleted\n", "src/app.py": "print('hi')\n"}

RepoFactory = Callable[..., Path]


@pytest.fixture
def ws(repo_factory: RepoFactory, tmp_path: Path) -> Workspace:
    return prepare(str(repo_factory(FILES)), tmp_path / "run", "decode/run-1")


def export(workspace: Workspace, script: str) -> bytes:
    """Make the agent's changes with `script` in the workspace copy, then export them through a local sandbox."""
    subprocess.run(["bash", "-ec", script], cwd=workspace.path, check=True, env=git_env())
    sandbox = open_sandbox("local", SandboxSpec(workspace=workspace.path))
    try:
        return sandbox.export_patch(workspace.base_sha)
    finally:
        sandbox.close()


def test_prepare_makes_two_independent_clones_and_checks_the_tree_out_once(repo_factory: RepoFactory,
                                                                           tmp_path: Path) -> None:
    origin = repo_factory(FILES)
    ws = prepare(str(origin), tmp_path / "run", "decode/run-1")
    assert ws.base == "main" and ws.base_sha == git(origin, "rev-parse", "HEAD")
    for clone in (ws.clean, ws.path):
        assert git(clone, "rev-parse", "--abbrev-ref", "HEAD") == "decode/run-1"
        assert git(clone, "rev-parse", "HEAD") == ws.base_sha
        assert git(clone, "diff", "--cached", "--name-only") == ""  # the index holds the base
        assert not (clone / ".git" / "hooks").exists()
    assert (ws.path / "src/app.py").read_text() == "print('hi')\n"
    assert [p.name for p in ws.clean.iterdir()] == [".git"]  # the clean clone has no working tree
    assert git(ws.clean, "remote", "get-url", "origin") == str(origin)
    assert git(ws.path, "remote") == ""
    clean_inodes = {p.stat().st_ino for p in (ws.clean / ".git").rglob("*") if p.is_file()}
    assert not clean_inodes & {p.stat().st_ino for p in (ws.path / ".git").rglob("*") if p.is_file()}
    assert not (ws.path / ".git" / "objects" / "info" / "alternates").exists()  # no object borrowed either


def test_base_can_be_a_branch_a_tag_or_a_commit(repo_factory: RepoFactory, tmp_path: Path) -> None:
    origin = repo_factory(FILES)
    first = git(origin, "rev-parse", "HEAD")
    git(origin, "checkout", "-q", "-b", "dev")
    (origin / "dev.txt").write_text("dev\n")
    git(origin, "add", "-A")
    git(origin, "commit", "-q", "-m", "dev")
    git(origin, "tag", "v1", first)
    dev = git(origin, "rev-parse", "HEAD")
    git(origin, "checkout", "-q", "main")
    assert prepare(str(origin), tmp_path / "a", "b1", base="dev").base_sha == dev
    assert prepare(str(origin), tmp_path / "b", "b1", base="v1").base_sha == first
    assert prepare(str(origin), tmp_path / "c", "b1", base=dev).base_sha == dev
    with pytest.raises(DecodeError, match="'nope' is neither a branch"):
        prepare(str(origin), tmp_path / "d", "b1", base="nope")
    with pytest.raises(DecodeError, match="not a valid git ref"):
        prepare(str(origin), tmp_path / "e", "--upload-pack=touch")


def test_bad_sources_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(DecodeError, match="does not exist"):
        prepare(str(tmp_path / "missing"), tmp_path / "run1", "b")
    (tmp_path / "plain").mkdir()
    with pytest.raises(DecodeError, match="cloning .* failed: fatal: .*") as caught:
        prepare(str(tmp_path / "plain"), tmp_path / "run2", "b")
    assert caught.value.stderr and caught.value.exit_code
    with pytest.raises(DecodeError, match="contains credentials"):
        prepare(f"https://x-access-token:{TOKEN}@github.com/o/r.git", tmp_path / "run3", "b")


def test_agent_changes_are_committed_and_planted_traps_never_fire(ws: Workspace, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    trap = f"#!/bin/sh\ntouch {marker}\n"
    hooks = ws.path / ".git" / "hooks"
    hooks.mkdir()
    for name in ("pre-commit", "post-commit", "post-checkout", "post-index-change", "reference-transaction",
                 "fsmonitor"):
        (hooks / name).write_text(trap)
        (hooks / name).chmod(0o755)
    git(ws.path, "config", "core.fsmonitor", str(hooks / "fsmonitor"))
    git(ws.path, "status")  # the traps are live for anyone reading the sandbox's .git
    assert marker.exists()
    marker.unlink()

    patch = export(ws, "echo more >> README.md && rm old.txt && mkdir -p pkg && echo 'x = 1' > pkg/new.py"
                       " && printf '\\000\\001\\377' > pkg/blob.bin && printf '#!/bin/sh\\n' > run.sh"
                       " && chmod +x run.sh && ln -s ../README.md pkg/readme-link")
    assert ws.apply_patch(patch).changed == ["README.md", "old.txt", "pkg/blob.bin", "pkg/new.py", "pkg/readme-link",
                                     "run.sh"]
    sha = ws.commit("Fix the thing\n\nLonger body.", co_author="Alice <alice@example.com>")
    assert not marker.exists()
    assert sha == git(ws.clean, "rev-parse", "decode/run-1") and git(ws.clean, "rev-parse", f"{sha}^") == ws.base_sha
    assert git(ws.clean, "show", "--name-status", "--format=", sha).splitlines() == [
        "M\tREADME.md", "D\told.txt", "A\tpkg/blob.bin", "A\tpkg/new.py", "A\tpkg/readme-link", "A\trun.sh"]
    assert git(ws.clean, "diff", "--cached", "--name-only") == ""
    blob = subprocess.run(["git", "show", f"{sha}:pkg/blob.bin"], cwd=ws.clean, capture_output=True, check=True)
    assert blob.stdout == b"\0\1\377" and git(ws.clean, "ls-tree", sha, "run.sh").startswith("100755 ")
    assert git(ws.clean, "ls-tree", sha, "pkg/readme-link").startswith("120000 ")
    assert git(ws.clean, "show", f"{sha}:pkg/readme-link") == "../README.md"
    log = git(ws.clean, "log", "-1", "--format=%an <%ae>|%cn|%B")
    assert log.startswith("decode-bot <decode-bot@users.noreply.github.com>|decode-bot|Fix the thing\n\nLonger body.")
    assert log.rstrip().endswith("Co-authored-by: Alice <alice@example.com>")


def test_no_changes_means_no_commit(ws: Workspace) -> None:
    assert export(ws, "true") == b""
    assert ws.apply_patch(b"").changed == []
    assert ws.commit("nothing") is None
    assert git(ws.clean, "rev-parse", "HEAD") == ws.base_sha


def patch_for(path: str, mode: str = "100644", body: str = "[core]\n\tfsmonitor = /tmp/x\n") -> bytes:
    lines = body.splitlines()
    return (f"diff --git a/{path} b/{path}\nnew file mode {mode}\n--- /dev/null\n+++ b/{path}\n"
            f"@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{line}\n" for line in lines)).encode()


@pytest.mark.parametrize("path", [".git/config", "sub/.git/hooks/pre-commit", ".GIT/config", ".git./config",
                                  "git~1/config", "../outside.txt", "a/../../outside.txt"])
def test_patches_into_git_or_outside_are_left_out(ws: Workspace, path: str) -> None:
    applied = ws.apply_patch(patch_for(path) + patch_for("fix.txt", body="fixed\n"))
    assert applied.changed == ["fix.txt"]
    assert list(applied.left_out) == [path] and re.search(r"inside \.git|'\.\.'", applied.left_out[path])
    assert git(ws.clean, "diff", "--cached", "--name-status") == "A\tfix.txt"


def test_absolute_paths_are_left_out(ws: Workspace) -> None:
    patch = patch_for("x").replace(b"+++ b/x", b"+++ /etc/x")
    assert ws.apply_patch(patch) == ([], {"/etc/x": "an absolute or empty path"})


def test_hunk_lines_that_look_like_headers_are_content(ws: Workspace) -> None:
    body = "-- ../../etc/passwd\n++ /.git/config\n"
    assert ws.apply_patch(patch_for("notes.sql", body=body)).changed == ["notes.sql"]
    assert git(ws.clean, "show", ":notes.sql") + "\n" == body


def test_symlinks_leaving_the_repository_are_left_out_and_the_rest_kept(ws: Workspace) -> None:
    patch = export(ws, "ln -s /etc/passwd leak && echo ok > fine.txt")
    applied = ws.apply_patch(patch)
    assert applied.changed == ["fine.txt"] and "symlink to /etc/passwd" in applied.left_out["leak"]
    assert git(ws.clean, "diff", "--cached", "--name-only") == "fine.txt"
    for target, why in (("../../escape", "outside the repository"), ("../.git/config", "into .git")):
        assert why in ws.apply_patch(patch_for("docs/link", mode="120000", body=target)).left_out["docs/link"]


def test_nested_repositories_are_left_out(ws: Workspace) -> None:
    patch = export(ws, "git init -q vendored && cd vendored && git -c user.name=a -c user.email=a@b"
                       " commit -q --allow-empty -m x")
    assert ws.apply_patch(patch).left_out == {
        "vendored": "a nested git repository (a gitlink); remove its .git directory or leave it out"}


def test_a_patch_that_does_not_apply_is_refused(ws: Workspace) -> None:
    patch = export(ws, "echo changed > README.md")
    blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=ws.clean, input=b"changed elsewhere\n",
                          capture_output=True, check=True).stdout.decode().strip()
    git(ws.clean, "update-index", "--cacheinfo", f"100644,{blob},README.md")
    git(ws.clean, "commit", "-qm", "concurrent")
    with pytest.raises(PatchRefused, match="does not apply cleanly"):
        ws.apply_patch(patch)


def test_secrets_are_neither_committed_nor_written_in_messages(repo_factory: RepoFactory, tmp_path: Path) -> None:
    ws = prepare(str(repo_factory(FILES)), tmp_path / "run", "b", token=TOKEN)
    with pytest.raises(PatchRefused, match="configured secret"):
        ws.apply_patch(export(ws, f"echo 'TOKEN = \"{TOKEN}\"' > leak.py"))
    assert ws.apply_patch(export(ws, "rm leak.py && echo fine > fine.txt")).changed == ["fine.txt"]
    ws.commit(f"Used {TOKEN}")
    assert TOKEN not in git(ws.clean, "log", "-1", "--format=%B")
    with pytest.raises(DecodeError, match="co-author"):
        ws.commit("x", co_author="Mallory\nSigned-off-by: someone")


def test_git_env_carries_the_token_only_as_a_header() -> None:
    env = git_env(TOKEN, base={"PATH": "/usr/bin", "GIT_DIR": "/elsewhere", "GITHUB_TOKEN": TOKEN})
    pairs = {env[f"GIT_CONFIG_KEY_{i}"]: env[f"GIT_CONFIG_VALUE_{i}"] for i in range(int(env["GIT_CONFIG_COUNT"]))}
    expected = base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()
    assert pairs["http.extraHeader"] == f"Authorization: Basic {expected}"
    assert pairs["core.hooksPath"] == os.devnull and pairs["core.fsmonitor"] == "false"
    assert "protocol.file.allow" not in pairs and git_env(local=True)["GIT_CONFIG_VALUE_10"] == "always"
    assert env["GIT_TERMINAL_PROMPT"] == "0" and env["GIT_CONFIG_NOSYSTEM"] == "1" and env["GIT_CONFIG_GLOBAL"]
    assert "GIT_DIR" not in env and "GITHUB_TOKEN" not in env
    assert "http.extraHeader" not in git_env().values()


def test_cloning_over_http_sends_the_token_as_a_header_and_stores_it_nowhere(
    repo_factory: RepoFactory, tmp_path: Path
) -> None:
    served = tmp_path / "served"
    served.mkdir()
    subprocess.run(["git", "clone", "-q", "--bare", str(repo_factory(FILES)), str(served / "o" / "r.git")],
                   check=True, env=git_env(local=True))
    with GitHttpServer(served, password=TOKEN) as server:
        url = server.url + "o/r.git"
        with pytest.raises(DecodeError, match="cloning") as caught:
            prepare(url, tmp_path / "anon", "b")
        assert caught.value.stderr and TOKEN not in str(caught.value)
        with pytest.raises(DecodeError, match="cloning"):
            prepare(url, tmp_path / "wrong", "b", token="ghs_" + "W" * 36)
        ws = prepare(url, tmp_path / "run", "decode/run-1", token=TOKEN)
    assert git(ws.clean, "show", "HEAD:README.md") == "# demo" and ws.base == "main"
    assert any(r["authorization"].startswith("Basic ") for r in server.requests)
    assert all(TOKEN not in r["path"] for r in server.requests)
    assert git(ws.clean, "remote", "get-url", "origin") == url
    encoded = base64.b64encode(f"x-access-token:{TOKEN}".encode())
    for clone in (ws.clean, ws.path):
        for file in (clone / ".git").rglob("*"):
            if file.is_file():
                data = file.read_bytes()
                assert TOKEN.encode() not in data and encoded not in data, file


def test_workflow_changes_are_left_out_unless_allowed(ws: Workspace) -> None:
    patch = export(ws, "mkdir -p .github/workflows && echo 'on: push' > .github/workflows/x.yml && echo ok > fix.txt")
    applied = ws.apply_patch(patch)
    assert applied.changed == ["fix.txt"] and applied.left_out == {".github/workflows/x.yml": WORKFLOW_REASON}
    sha = ws.commit("fix")
    assert git(ws.clean, "show", "--name-only", "--format=", sha).splitlines() == ["fix.txt"]


def test_workflow_changes_are_kept_when_the_repository_allows_them(ws: Workspace) -> None:
    patch = export(ws, "mkdir -p .github/workflows && echo 'on: push' > .github/workflows/x.yml")
    assert ws.apply_patch(patch, keep_workflows=True) == ([".github/workflows/x.yml"], {})


def test_a_chain_of_links_is_left_out_and_the_rest_committed(ws: Workspace) -> None:
    patch = export(ws, "mkdir sub && ln -s .. sub/up && ln -s sub/up/sub/up/../../../etc/passwd x"
                       " && ln -s sub/up/README.md readme && echo fixed > fix.txt")
    applied = ws.apply_patch(patch)
    assert applied.changed == ["fix.txt", "readme", "sub/up"]
    assert list(applied.left_out) == ["x"] and "resolves outside the repository" in applied.left_out["x"]
    sha = ws.commit("fix")
    assert git(ws.clean, "show", "--name-only", "--format=", sha).splitlines() == ["fix.txt", "readme", "sub/up"]


def test_a_link_through_a_link_already_in_the_base_is_left_out(repo_factory: RepoFactory, tmp_path: Path) -> None:
    origin = repo_factory(FILES)
    os.symlink("..", origin / "up")
    git(origin, "add", "-A")
    git(origin, "commit", "-qm", "an upward link")
    ws = prepare(str(origin), tmp_path / "run", "b")
    applied = ws.apply_patch(export(ws, "ln -s up/up/etc x && echo ok > ok.txt"))
    assert applied.changed == ["ok.txt"] and list(applied.left_out) == ["x"]


def test_files_over_the_size_limit_are_left_out(ws: Workspace) -> None:
    patch = export(ws, "head -c 3000000 /dev/urandom > big.bin && echo small > small.txt")
    applied = ws.apply_patch(patch, max_file_bytes=2 * 1024 * 1024)
    assert applied.changed == ["small.txt"] and "3 MB, over the 2 MB limit" in applied.left_out["big.bin"]


def test_a_name_with_spaces_is_left_out_by_itself(ws: Workspace) -> None:
    patch = export(ws, "ln -s /etc 'my link' && printf '\\000\\001' > 'my data.bin' && echo a > a.txt")
    applied = ws.apply_patch(patch)
    assert applied.changed == ["a.txt", "my data.bin"] and list(applied.left_out) == ["my link"]
