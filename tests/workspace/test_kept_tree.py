"""A mirror's kept tree: the next run of a repository takes a checkout instead of writing every file again."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import pytest

from bot.cli import main
from bot.workspace.clone import Workspace, git_env, prepare
from bot.workspace.mirror import Mirrors
from tests.conftest import git
from tests.fakes.git_http import GitHttpServer
from tests.workspace.test_mirror import TOKEN, prepare_at_once, serve


def refs(repo: Path) -> list[str]:
    """Every ref of `repo` with its commit, and what HEAD names."""
    return [*git(repo, "for-each-ref", "--format=%(refname) %(objectname)").splitlines(),
            git(repo, "symbolic-ref", "HEAD")]


@contextmanager
def a_kept_tree(tmp_path: Path, work: Path | None = None, served: Path | None = None) -> Iterator[World]:
    """A served repository (`serve`, unless given), its mirror, and a tree kept beside it by a first run; the
    server runs until the block ends."""
    if work is None or served is None:
        work, served = serve(tmp_path)
    mirrors = Mirrors(tmp_path / "data" / "mirrors")
    with GitHttpServer(served, password=TOKEN) as server:
        url = server.url + "o/r.git"
        assert prepare(url, tmp_path / "one", "decode/one", token=TOKEN, mirrors=mirrors).keep_tree()
        yield World(work, mirrors, url, mirrors.tree(Mirrors.key(url)))


class World(NamedTuple):
    work: Path  # the upstream working repository (push to `origin` to change the remote)
    mirrors: Mirrors
    url: str
    tree: Path  # the kept tree


def run(world: World, tmp_path: Path, name: str, base: str | None = None, said: list[str] | None = None
        ) -> Workspace:
    """`prepare` of the world's URL as run `name`, on branch `decode/<name>`; what it says goes to `said`."""
    return prepare(world.url, tmp_path / name, f"decode/{name}", base, token=TOKEN, mirrors=world.mirrors,
                   say=(said if said is not None else []).append)


def test_the_next_run_takes_the_kept_tree_and_gets_exactly_what_a_fresh_checkout_gives(tmp_path: Path) -> None:
    work, served = serve(tmp_path)
    git(work, "tag", "v1")
    git(work, "push", "-q", "origin", "v1")
    with a_kept_tree(tmp_path, work, served) as world:
        (work / "README.md").write_text("# changed upstream\n")
        git(work, "rm", "-q", "src/app.py")
        (work / "new.txt").write_text("new\n")
        git(work, "add", "-A")
        git(work, "commit", "-qm", "upstream moved on")
        git(work, "tag", "-d", "v1")
        git(work, "tag", "v2")
        git(work, "push", "-q", "origin", "main", "v2", ":refs/tags/v1")
        said: list[str] = []
        second = run(world, tmp_path, "two", said=said)
        fresh = prepare(world.url, tmp_path / "three", "decode/two", token=TOKEN, mirrors=Mirrors(tmp_path / "other"))
    assert not world.tree.exists()  # taken: the tree is the second run's workspace now
    assert (second.path / "README.md").read_text() == "# changed upstream\n"
    assert not (second.path / "src/app.py").exists() and (second.path / "new.txt").read_text() == "new\n"
    assert refs(second.path) == refs(fresh.path)  # the run branch and the remote's tags, v1 gone
    assert git(second.path, "status", "--porcelain", "--ignored") == ""
    assert git(second.path, "remote") == ""
    assert world.mirrors.entries()[0].tree == 0
    assert said == ["the workspace is the checkout an earlier run kept beside the mirror, brought to the base: "
                    "only the files that differ were written"]


def test_an_unchanged_file_of_the_kept_tree_is_not_written_again(tmp_path: Path) -> None:
    with a_kept_tree(tmp_path) as world:
        kept = (world.tree / "src/app.py").stat()
        (entry,) = world.mirrors.entries()
        assert entry.tree > 0 and entry.size > entry.tree  # the tree counts in the mirror's bound
        second = run(world, tmp_path, "two")
    now = (second.path / "src/app.py").stat()
    assert (now.st_ino, now.st_mtime_ns) == (kept.st_ino, kept.st_mtime_ns)


def test_the_kept_tree_shares_no_file_with_the_mirror(tmp_path: Path) -> None:
    with a_kept_tree(tmp_path) as world:
        mirror = world.mirrors.path(Mirrors.key(world.url))
    mirror_inodes = {f.stat().st_ino for f in mirror.rglob("*") if f.is_file()}
    tree_files = [f for f in world.tree.rglob("*") if f.is_file()]
    assert tree_files and all(f.stat().st_nlink == 1 and f.stat().st_ino not in mirror_inodes for f in tree_files)
    assert git(world.tree, "for-each-ref", "refs/heads/") == ""  # no run's branch is left in it


def test_two_runs_at_once_take_one_kept_tree_between_them(tmp_path: Path) -> None:
    with a_kept_tree(tmp_path) as world:
        inode = (world.tree / "README.md").stat().st_ino
        made = prepare_at_once(world.url, tmp_path, world.mirrors, ("a", "b"))
    assert sorted(made) == ["a", "b"]
    took = [name for name, ws in made.items() if (ws.path / "README.md").stat().st_ino == inode]
    assert len(took) == 1
    for name, ws in made.items():
        assert git(ws.path, "rev-parse", "--abbrev-ref", "HEAD") == f"decode/{name}"
        assert git(ws.path, "rev-parse", "HEAD") == git(world.work, "rev-parse", "main")


def test_a_base_other_than_the_default_branch_is_checked_out_from_the_kept_tree(tmp_path: Path) -> None:
    with a_kept_tree(tmp_path) as world:
        git(world.work, "checkout", "-q", "feature")
        (world.work / "feature.txt").write_text("on feature\n")
        git(world.work, "add", "-A")
        git(world.work, "commit", "-qm", "feature work")
        git(world.work, "push", "-q", "origin", "feature")
        ws = run(world, tmp_path, "two", "feature")
    assert not world.tree.exists() and (ws.path / "feature.txt").read_text() == "on feature\n"
    assert git(ws.path, "rev-parse", "HEAD") == git(world.work, "rev-parse", "feature") == ws.base_sha


def test_a_broken_kept_tree_is_replaced_by_a_fresh_checkout(tmp_path: Path) -> None:
    with a_kept_tree(tmp_path) as world:
        shutil.rmtree(world.tree / ".git" / "objects")  # a disk that lost part of it
        (world.tree / "README.md").write_text("left over\n")
        said: list[str] = []
        ws = run(world, tmp_path, "two", said=said)
    assert (ws.path / "README.md").read_text() == "# demo\n"
    assert git(ws.path, "status", "--porcelain", "--ignored") == ""
    [line] = said  # said, and not that the tree was taken
    assert line.startswith("the checkout an earlier run kept beside the mirror could not be brought to the base (")
    assert line.endswith("); the workspace was copied afresh from the clean clone instead")


def test_a_repository_with_submodules_gets_no_kept_tree(tmp_path: Path) -> None:
    work, served = serve(tmp_path)
    blob = git(work, "rev-parse", "HEAD")
    git(work, "update-index", "--add", "--cacheinfo", f"160000,{blob},vendor/lib")
    git(work, "commit", "-qm", "a submodule")
    git(work, "push", "-q", "origin", "main")
    mirrors = Mirrors(tmp_path / "data" / "mirrors")
    with GitHttpServer(served, password=TOKEN) as server:
        ws = prepare(server.url + "o/r.git", tmp_path / "one", "decode/one", token=TOKEN, mirrors=mirrors)
    assert not ws.keep_tree()
    assert list(mirrors.directory.glob("*.tree")) == [] and list(mirrors.directory.glob(".*")) == []


def test_decode_cache_counts_and_clears_the_kept_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("DECODE_DATA_DIR", str(tmp_path / "data"))
    with a_kept_tree(tmp_path) as world:
        (mirror,) = world.mirrors.entries()
    assert main(["cache", "list"]) == 0
    assert "with a checkout kept for the next run" in capsys.readouterr().out
    assert main(["cache", "clear", mirror.key[:12]]) == 0
    assert not world.tree.exists() and os.listdir(world.mirrors.directory) == [f"{mirror.key}.lock"]


def test_a_tree_a_killed_run_was_making_is_pruned_after_a_day(tmp_path: Path) -> None:
    mirrors = Mirrors(tmp_path / "mirrors")
    scratch = mirrors.directory / ".abc.tree-x1"
    (scratch / "tree").mkdir(parents=True)
    subprocess.run(["touch", "-d", "2 days ago", str(scratch)], check=True, env=git_env())
    fresh = mirrors.directory / ".abc.tree-x2"
    fresh.mkdir()
    mirrors.prune(30, 10**9)
    assert not scratch.exists() and fresh.exists()
