"""Git LFS files: the hand-back never commits over a pointer, nor adds a file .gitattributes sends to LFS.

git-lfs itself is not needed: the pointers are written by hand, as the spec lays them out
(https://github.com/git-lfs/git-lfs/blob/main/docs/spec.md). Real git, the real agentd behind a local sandbox.
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.sandbox import HandBack
from bot.sandbox.agentd.paths import LFS_NEW_REASON, LFS_REASON
from bot.workspace.clone import Workspace, prepare
from tests.conftest import GIT_ENV, git
from tests.support.hand_back import hand_back

CONTENT = b"\x00real model weights\x01" * 100
OTHER = b"other large content\n"


def pointer(data: bytes) -> str:
    return (f"version https://git-lfs.github.com/spec/v1\noid sha256:{hashlib.sha256(data).hexdigest()}\n"
            f"size {len(data)}\n")


FILES = {".gitattributes": "*.bin filter=lfs diff=lfs merge=lfs -text\n", "model.bin": pointer(CONTENT),
         "data/other.bin": pointer(OTHER), "README.md": "# lfs\n"}


@pytest.fixture
def ws(repo_factory: Callable[..., Path], tmp_path: Path) -> Workspace:
    return prepare(str(repo_factory(FILES)), tmp_path / "run", "decode/run-1")


@pytest.mark.parametrize("script", [
    "echo edited > model.bin",
    "printf 'more\\n' >> model.bin",
    "rm model.bin",
    "chmod +x model.bin",
    "rm model.bin && ln -s README.md model.bin",
])
def test_a_changed_lfs_file_is_left_out_and_the_rest_committed(ws: Workspace, script: str) -> None:
    hand = hand_back(ws, f"{script} && echo fixed >> README.md && echo note > notes.txt")
    assert hand.left_out == {"model.bin": LFS_REASON} and b"model.bin" not in hand.patch
    applied = ws.apply_patch(hand.patch)
    assert applied.changed == ["README.md", "notes.txt"] and applied.left_out == {}
    sha = ws.commit("fix")
    assert git(ws.clean, "show", "--name-only", "--format=", sha).splitlines() == ["README.md", "notes.txt"]
    assert git(ws.clean, "show", f"{sha}:model.bin") + "\n" == FILES["model.bin"]


def test_untouched_pointers_and_checked_out_content_are_no_change(ws: Workspace) -> None:
    assert hand_back(ws, "true") == HandBack(b"", {})
    (ws.path / "model.bin").write_bytes(CONTENT)  # what a host with git-lfs checks out
    (ws.path / "data/other.bin").write_bytes(OTHER)
    assert hand_back(ws, "true") == HandBack(b"", {})


def test_a_new_file_matching_an_lfs_pattern_is_left_out(ws: Workspace) -> None:
    hand = hand_back(ws, "mkdir -p out && printf 'x\\000' > out/new.bin && echo ok > ok.txt")
    assert hand.left_out == {"out/new.bin": LFS_NEW_REASON} and b"new.bin" not in hand.patch
    assert ws.apply_patch(hand.patch).changed == ["ok.txt"]


def test_the_host_leaves_out_lfs_changes_whatever_the_sandbox_handed_back(ws: Workspace) -> None:
    edited = ws.path / "model.bin"
    edited.write_text("edited\n")
    (ws.path / "new.bin").write_text("new\n")
    (ws.path / "ok.txt").write_text("ok\n")
    git(ws.path, "add", "-A")
    patch = subprocess.run(["git", "diff", "--cached", "--binary", ws.base_sha], cwd=ws.path, env=GIT_ENV,
                           check=True, capture_output=True).stdout
    applied = ws.apply_patch(patch)
    assert applied.changed == ["ok.txt"]
    assert applied.left_out == {"model.bin": LFS_REASON, "new.bin": LFS_NEW_REASON}
