"""The hand-back of submodules and Git LFS files, in every sandbox backend: what it cannot carry is named.

The workspace is a real prepared copy (bot/workspace/clone.py::prepare) with a submodule and an LFS pointer;
the changes are made by commands inside the sandbox and handed back by its agentd.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from bot.sandbox import Sandbox
from bot.sandbox.agentd.paths import LFS_NEW_REASON, LFS_REASON
from bot.workspace.clone import Workspace, prepare
from tests.conftest import git, make_repo

POINTER = ("version https://git-lfs.github.com/spec/v1\n"
           "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n")
SUBMODULE = "changes inside the submodule lib are not carried (decode-bot commits to this repository only)"


@pytest.fixture
def prepared(tmp_path: Path) -> Workspace:
    lib = make_repo(tmp_path / "lib", {"lib.txt": "lib\n"})
    top = make_repo(tmp_path / "top", {"README.md": "# top\n", ".gitattributes": "*.bin filter=lfs -text\n",
                                       "model.bin": POINTER})
    git(top, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "lib")
    git(top, "commit", "-q", "-m", "submodule")
    return prepare(str(top), tmp_path / "run", "decode/run-1")


def test_submodule_and_lfs_changes_are_named_and_the_rest_handed_back(
    mode: str, prepared: Workspace, open_box: Callable[..., Sandbox]
) -> None:
    sandbox = open_box(mode, prepared.path)
    assert sandbox.read_file("lib/lib.txt") == b"lib\n"
    base = prepared.base_sha
    assert sandbox.check_hand_back(base) == {} and sandbox.hand_back(base).patch == b""
    sandbox.run("echo more >> lib/lib.txt && echo weights > model.bin && echo x > new.bin && echo ok > ok.txt")
    expected = {"lib": SUBMODULE, "model.bin": LFS_REASON, "new.bin": LFS_NEW_REASON}
    assert sandbox.check_hand_back(base) == expected
    hand = sandbox.hand_back(base)
    assert hand.left_out == expected
    applied = prepared.apply_patch(hand.patch)
    assert applied.changed == ["ok.txt"] and applied.left_out == {}
