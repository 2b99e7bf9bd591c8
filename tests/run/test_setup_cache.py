"""The setup cache's pure parts: the key, the archive check, decode.yml's `setup_cache_key`, pruning, rendering."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from bot.core.errors import ConfigError
from bot.run.repo_config import parse_repo_config
from bot.config import Settings
from bot.run.setup_cache import Entry, SetupCache, archive_problem, cache_key
from bot.run.transcript import render_markdown

BASE = dict(repo="acme/app", mode="docker", image_id="sha256:1", setup=["pip install -e ."],
            files={"requirements.lock": b"a==1\n"})


def test_the_key_changes_with_everything_the_state_depends_on():
    key = cache_key(**BASE)
    assert key == cache_key(**BASE) and len(key) == 64
    changed = [{"repo": "acme/other"}, {"image_id": "sha256:2"}, {"setup": ["pip install ."]},
               {"setup": ["pip install -e .", "true"]}, {"files": {"requirements.lock": b"a==2\n"}},
               {"files": {"requirements.lock": None}}, {"files": {}}, {"mode": "modal"}]
    assert len({cache_key(**{**BASE, **change}) for change in changed} | {key}) == len(changed) + 1


def test_setup_cache_key_is_a_list_of_repository_paths():
    assert parse_repo_config({"setup": "x"}).setup_cache_key is None
    assert parse_repo_config({"setup": "x", "setup_cache_key": []}).setup_cache_key == ()
    assert parse_repo_config({"setup_cache_key": ["a.lock", "web/package-lock.json"]}).setup_cache_key == \
        ("a.lock", "web/package-lock.json")
    for bad in ("a.lock", ["/etc/passwd"], ["../x"], ["a/../b"], [""], [3], ["dir/"], ["a\\b"], ["x"] * 21):
        with pytest.raises(ConfigError, match="'setup_cache_key' must be a list of up to 20 file paths"):
            parse_repo_config({"setup_cache_key": bad})


def test_the_size_setting_says_what_to_write():
    assert Settings.from_env({}).sandbox.setup_cache_mb == 10240
    assert Settings.from_env({"DECODE_SETUP_CACHE_MB": "0"}).sandbox.setup_cache_mb == 0
    with pytest.raises(ConfigError, match="DECODE_SETUP_CACHE_MB must be a whole number of megabytes"):
        Settings.from_env({"DECODE_SETUP_CACHE_MB": "10G"})


def tar_of(path: Path, entries: list[tuple[str, str, str]]) -> Path:
    """A tar at `path` of (name, kind, data-or-link-target) entries; kind is file, dir, sym, hard or fifo."""
    with tarfile.open(path, "w") as tar:
        for name, kind, data in entries:
            info = tarfile.TarInfo(name)
            info.type = {"file": tarfile.REGTYPE, "dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE,
                         "hard": tarfile.LNKTYPE, "fifo": tarfile.FIFOTYPE}[kind]
            if kind in ("sym", "hard"):
                info.linkname = data
            payload = data.encode() if kind == "file" else b""
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
    return path


def test_a_plain_archive_passes(tmp_path):
    good = tar_of(tmp_path / "good.tar", [
        ("workspace/node_modules", "dir", ""), ("workspace/node_modules/x.js", "file", "x"),
        ("workspace/node_modules/.bin/x", "sym", "../x.js"), ("home/.local/bin/tool", "file", "#!/bin/sh\n"),
        ("home/.gitconfig", "file", "")])
    assert archive_problem(good) is None


@pytest.mark.parametrize(("entries", "why"), [
    ([("workspace/../escape", "file", "x")], "leaves the repository through '..'"),
    ([("/etc/cron.d/x", "file", "x")], "is not under workspace/ or home/"),
    ([("etc/x", "file", "x")], "is not under workspace/ or home/"),
    ([("workspace/.git/hooks/pre-commit", "file", "x")], "inside .git"),
    ([("workspace/out", "sym", "/etc")], "absolute path outside the repository"),
    ([("workspace/out", "sym", "../../etc")], "resolves outside the repository"),
    ([("home/ws", "sym", "../workspace")], "resolves outside the repository"),
    ([("workspace/a", "sym", "b"), ("workspace/a/c", "file", "x")], "workspace/a/c lies below a symlink"),
    ([("workspace/a", "hard", "/etc/passwd")], "neither a file, a directory nor a symlink"),
    ([("workspace/p", "fifo", "")], "neither a file, a directory nor a symlink"),
])
def test_a_hostile_archive_is_refused(tmp_path, entries, why):
    assert why in (archive_problem(tar_of(tmp_path / "bad.tar", entries)) or "")


def test_a_broken_archive_is_refused(tmp_path):
    (tmp_path / "x.tar").write_bytes(b"not a tar" * 100)
    assert "cannot be read" in (archive_problem(tmp_path / "x.tar") or "")


def entry(key: str, *, created: float, used: float, size: int) -> Entry:
    return Entry(key, "acme/app", "none", "img", "sha256:1", created, used, size)


def test_prune_drops_old_entries_then_the_least_recently_used(tmp_path):
    cache = SetupCache(tmp_path / "setup-cache")
    now = 1_000_000_000.0
    for e in (entry("old", created=now - 40 * 86400, used=now, size=1),
              entry("a", created=now - 3600, used=now - 10, size=6),
              entry("b", created=now - 3600, used=now - 5, size=6),
              entry("c", created=now - 3600, used=now - 1, size=3)):
        cache.write(e)
        cache.archive(e.key).write_bytes(b"")
    assert oct(cache.directory.stat().st_mode & 0o777) == "0o700"
    removed = cache.prune(30, 10, now=now)
    assert sorted(e.key for e in removed) == ["a", "old"]
    assert [e.key for e in cache.entries()] == ["c", "b"]
    assert not cache.archive("a").exists() and cache.archive("b").exists()
    (cache.directory / "junk.json").write_text(json.dumps({"key": 1}))
    assert [e.key for e in cache.entries()] == ["c", "b"]  # unreadable metadata is skipped


def test_the_transcript_says_hit_miss_and_refused():
    text = render_markdown([
        {"type": "setup_cache", "result": "miss", "key": "abc123", "saved": "saved (1.0 MB)"},
        {"type": "setup_cache", "result": "hit", "key": "abc123"},
        {"type": "setup_cache", "result": "refused", "key": "abc123", "reason": "'workspace/../x': leaves"}])
    assert "> **setup cache:** miss, key `abc123`: setup ran; saved (1.0 MB)" in text
    assert "> **setup cache:** hit, key `abc123`: setup skipped, its state restored" in text
    assert "> **setup cache:** entry `abc123` refused and removed" in text


def test_cache_clear_says_what_to_give(tmp_path, monkeypatch, capsys):
    from bot.cli import main

    monkeypatch.setenv("DECODE_DATA_DIR", str(tmp_path))
    cache = SetupCache(tmp_path / "setup-cache")
    for key in ("abc1", "abc2"):
        cache.write(entry(key, created=0, used=0, size=0))
    assert main(["cache", "clear"]) == 2
    assert "takes either a KEY (as `decode cache list` shows it) or --all" in capsys.readouterr().err
    assert main(["cache", "clear", "ffff"]) == 2
    assert "no setup cache entry or mirror has the key 'ffff': see `decode cache list`" in capsys.readouterr().err
    assert main(["cache", "clear", "abc"]) == 2
    assert "'abc' starts 2 keys: give more of it" in capsys.readouterr().err
    assert main(["cache", "clear", "--all"]) == 0
    assert cache.entries() == []
