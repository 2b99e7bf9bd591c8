"""The mirror per repository under the data dir: a run fetches only what is new and clones from it."""

from __future__ import annotations

import base64
import fcntl
import subprocess
import threading
from pathlib import Path

import pytest

from bot.cli import main
from bot.workspace.clone import Workspace, git_env, prepare
from bot.workspace.mirror import Mirrors
from tests.conftest import git, make_repo
from tests.fakes.git_http import GitHttpServer

TOKEN = "ghs_" + "M1rr0rT0ken" * 4


def serve(tmp_path: Path) -> tuple[Path, Path]:
    """A working repository and its bare copy under `served/o/r.git` (what the server serves)."""
    work = make_repo(tmp_path / "work", {"README.md": "# demo\n", "src/app.py": "print('hi')\n"})
    git(work, "branch", "feature")
    bare = tmp_path / "served" / "o" / "r.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True, env=git_env(local=True))
    git(work, "remote", "add", "origin", str(bare))
    return work, tmp_path / "served"


def prepare_at_once(url: str, tmp_path: Path, mirrors: Mirrors, names: tuple[str, ...]) -> dict[str, Workspace]:
    """`prepare` of `url` for each of `names` (`tmp_path/<name>`, branch `decode/<name>`), all started together."""
    made: dict[str, Workspace] = {}

    def run(name: str) -> None:
        made[name] = prepare(url, tmp_path / name, f"decode/{name}", token=TOKEN, mirrors=mirrors)

    threads = [threading.Thread(target=run, args=(name,)) for name in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return made


def test_two_runs_of_one_repository_at_once_share_one_mirror_and_both_succeed(tmp_path: Path) -> None:
    work, served = serve(tmp_path)
    mirrors = Mirrors(tmp_path / "data" / "mirrors")
    with GitHttpServer(served, password=TOKEN) as server:
        url = server.url + "o/r.git"
        made = prepare_at_once(url, tmp_path, mirrors, ("a", "b"))
    assert sorted(made) == ["a", "b"]
    for name, ws in made.items():
        assert git(ws.path, "rev-parse", "--abbrev-ref", "HEAD") == f"decode/{name}"
        assert ws.base_sha == git(work, "rev-parse", "main") and (ws.path / "src/app.py").is_file()
        assert git(ws.clean, "remote", "get-url", "origin") == url  # pushes go to the remote, not the mirror
        assert not (ws.clean / ".git/objects/info/alternates").exists()
    assert [m.url for m in mirrors.entries()] == [url] and len(list(mirrors.directory.glob("*.git"))) == 1


def test_a_run_waits_while_another_fetches_into_the_mirror(tmp_path: Path) -> None:
    _, served = serve(tmp_path)
    mirrors = Mirrors(tmp_path / "data" / "mirrors")
    with GitHttpServer(served, password=TOKEN) as server:
        url = server.url + "o/r.git"
        prepare(url, tmp_path / "first", "decode/first", token=TOKEN, mirrors=mirrors)
        asked = len(server.requests)
        with open(mirrors.directory / f"{Mirrors.key(url)}.lock") as other_run:
            fcntl.flock(other_run, fcntl.LOCK_EX)  # as a run fetching into the mirror holds it
            waiting = threading.Thread(target=prepare, args=(url, tmp_path / "second", "decode/second"),
                                       kwargs={"token": TOKEN, "mirrors": mirrors})
            waiting.start()
            waiting.join(1.0)
            assert waiting.is_alive() and len(server.requests) == asked  # no fetch while the other holds it
        waiting.join()
        assert len(server.requests) > asked
    assert git(tmp_path / "second" / "workspace", "rev-parse", "--abbrev-ref", "HEAD") == "decode/second"


def test_a_force_push_between_runs_is_seen_and_deleted_branches_are_gone(tmp_path: Path) -> None:
    work, served = serve(tmp_path)
    mirrors = Mirrors(tmp_path / "data" / "mirrors")
    with GitHttpServer(served, password=TOKEN) as server:
        url = server.url + "o/r.git"
        first = prepare(url, tmp_path / "one", "decode/one", token=TOKEN, mirrors=mirrors)
        (work / "README.md").write_text("# rewritten\n")
        git(work, "commit", "-qa", "--amend", "-m", "rewritten history")
        git(work, "push", "-q", "--force", "origin", "main")
        git(work, "push", "-q", "origin", "--delete", "feature")
        second = prepare(url, tmp_path / "two", "decode/two", token=TOKEN, mirrors=mirrors)
        fetches = [r for r in server.requests if r["method"] == "POST"]
    assert second.base_sha == git(work, "rev-parse", "main") != first.base_sha
    merged = subprocess.run(["git", "merge-base", "--is-ancestor", first.base_sha, second.base_sha],
                            cwd=second.clean, env=git_env())
    assert merged.returncode == 1  # the old history is not under the new
    assert (second.path / "README.md").read_text() == "# rewritten\n"
    assert git(second.clean, "log", "--format=%s") == "rewritten history"
    assert git(second.clean, "for-each-ref", "--format=%(refname)", "refs/remotes/origin/").split() == [
        "refs/remotes/origin/HEAD", "refs/remotes/origin/main"]  # `feature`, deleted, is gone
    assert fetches, "the second run fetched from the remote"


def test_the_token_is_never_written_under_the_data_dir(tmp_path: Path) -> None:
    _, served = serve(tmp_path)
    data = tmp_path / "data"
    with GitHttpServer(served, password=TOKEN) as server:
        for name in ("one", "two"):
            prepare(server.url + "o/r.git", tmp_path / name, f"decode/{name}", token=TOKEN,
                    mirrors=Mirrors(data / "mirrors"))
    encoded = base64.b64encode(f"x-access-token:{TOKEN}".encode())
    files = [f for f in data.rglob("*") if f.is_file()]
    assert any(f.name == "config" for f in files) and any(f.suffix == ".json" for f in files)
    for file in files:
        assert TOKEN.encode() not in file.read_bytes() and encoded not in file.read_bytes(), file


def test_decode_cache_lists_and_clears_mirrors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    _, served = serve(tmp_path)
    monkeypatch.setenv("DECODE_DATA_DIR", str(tmp_path / "data"))
    mirrors = Mirrors(tmp_path / "data" / "mirrors")
    with GitHttpServer(served, password=TOKEN) as server:
        url = server.url + "o/r.git"
        prepare(url, tmp_path / "one", "decode/one", token=TOKEN, mirrors=mirrors)
    (mirror,) = mirrors.entries()
    assert main(["cache", "list"]) == 0
    assert f"{mirror.key[:12]}  mirror of {url}" in capsys.readouterr().out
    assert main(["cache", "clear", mirror.key[:12]]) == 0
    assert "removed 1 setup cache entries and mirrors" in capsys.readouterr().err
    assert mirrors.entries() == [] and not mirrors.path(mirror.key).exists()


def test_mirrors_are_bounded_by_age_and_size_and_one_in_use_is_kept(tmp_path: Path) -> None:
    work, served = serve(tmp_path)
    mirrors = Mirrors(tmp_path / "mirrors")
    with GitHttpServer(served, password=TOKEN) as server:
        for name in ("r", "s", "t"):
            if name != "r":
                subprocess.run(["git", "clone", "-q", "--bare", str(work), str(served / "o" / f"{name}.git")],
                               check=True, env=git_env(local=True))
            prepare(server.url + f"o/{name}.git", tmp_path / name, "b", token=TOKEN, mirrors=mirrors)
    newest, middle, oldest = mirrors.entries()
    assert [m.url.rsplit("/", 1)[1] for m in (newest, middle, oldest)] == ["t.git", "s.git", "r.git"]
    assert mirrors.prune(30, 10**9, now=oldest.last_used + 30 * 86400 - 1) == []
    assert mirrors.prune(30, newest.size + middle.size) == [oldest]
    with open(mirrors.directory / f"{middle.key}.lock") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert mirrors.prune(30, 0) == [newest]  # `middle` is in use: kept
    assert mirrors.entries() == [middle] and not mirrors.path(newest.key).exists()


def test_a_mirror_a_killed_run_left_locked_is_fetched_again(tmp_path: Path) -> None:
    work, served = serve(tmp_path)
    mirrors = Mirrors(tmp_path / "mirrors")
    with GitHttpServer(served, password=TOKEN) as server:
        url = server.url + "o/r.git"
        prepare(url, tmp_path / "one", "b", token=TOKEN, mirrors=mirrors)
        (mirrors.path(Mirrors.key(url)) / "refs/heads/main.lock").write_text("")  # git was killed mid-update
        (work / "README.md").write_text("# newer\n")
        git(work, "commit", "-qam", "newer")
        git(work, "push", "-q", "origin", "main")
        ws = prepare(url, tmp_path / "two", "b", token=TOKEN, mirrors=mirrors)
    assert ws.base_sha == git(work, "rev-parse", "main")
