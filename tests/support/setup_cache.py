"""Helpers of the setup cache tests of each backend (tests/test_setup_cache_*.py): one run of the real pipeline
with a scripted model whose one tool call is `check`, what its transcript recorded, and a hostile archive."""

from __future__ import annotations

import io
import tarfile
import time
from pathlib import Path
from typing import Any

from bot.model.anthropic import AnthropicModel
from bot.run.pipeline import Job, Ran, execute
from bot.run.setup_cache import SetupCache
from bot.run.transcript import load_events


def run(fake_anthropic: Any, data: Path, repo: Path, run_id: str, *, mode: str, check: str,
        settings: dict[str, Any] | None = None, **job: str) -> tuple[Ran, float]:
    """The real pipeline on `repo` under `mode` (more `settings` if given); the outcome and its wall time."""
    fake_anthropic.script([[{"type": "tool_use", "name": "bash", "input": {"command": check}}],
                           [{"type": "text", "text": "Checked."}]])
    config = fake_anthropic.settings(sandbox_mode=mode, data_dir=data, **(settings or {}))
    started = time.monotonic()
    outcome = execute(Job(repo=str(repo), task="Check the setup", branch=f"decode/run-{run_id}", run_id=run_id, **job),
                      config.run, client=AnthropicModel(config.model, sleep=lambda s: None),
                      progress=lambda line: None)
    return outcome, time.monotonic() - started


def events(outcome: Ran, kind: str) -> list[dict]:
    """The run's transcript events of one type."""
    return [e for e in load_events(outcome.transcript_jsonl) if e["type"] == kind]


def agent_saw(outcome: Ran) -> list[str]:
    """The lines the agent's one tool call printed."""
    [result] = events(outcome, "tool_result")
    return result["output"].splitlines()


def make_hostile(data: Path, root: str) -> None:
    """Replace the one cache entry's archive with one whose `root`/out is a symlink to /etc and which then
    writes through it: the host must refuse it before the sandbox sees it."""
    cache = SetupCache(data / "setup-cache")
    [entry] = cache.entries()
    with tarfile.open(cache.archive(entry.key), "w") as tar:
        for name, target in ((f"{root}/out", "/etc"), (f"{root}/out/cron.d/x", None)):
            info = tarfile.TarInfo(name)
            if target:
                info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info, io.BytesIO(b""))


def assert_refused_then_setup_ran(second: Ran) -> None:
    """The run after `make_hostile`: the entry refused, setup run again and its state saved anew."""
    [refused, miss] = events(second, "setup_cache")
    assert refused["result"] == "refused" and "a symlink to /etc" in refused["reason"], refused
    assert miss["result"] == "miss" and miss["saved"].startswith("saved")
    assert [e["exit_code"] for e in events(second, "setup")] == [0]


def pull_request_head_run(run_one: Any, fake_anthropic: Any, data: Path, repo: Path) -> Ran:
    """Run on a pull request's head (`feature`, a README change) with decode.yml from `main`, by
    `run_one(fake_anthropic, data, repo, run_id, **job)`, and check that it filled no cache entry."""
    from tests.conftest import git

    git(repo, "checkout", "-qb", "feature")
    (repo / "README.md").write_text("# changed by a pull request\n")
    git(repo, "commit", "-qam", "Change the README")
    git(repo, "checkout", "-q", "main")
    outcome, _ = run_one(fake_anthropic, data, repo, "head", base="feature", config_base="main")
    [miss] = events(outcome, "setup_cache")
    assert miss["saved"].startswith("not saved: the workspace is not the commit decode.yml was read from"), miss
    assert SetupCache(data / "setup-cache").entries() == []
    return outcome


def assert_gone_image_refused(again: Ran) -> None:
    """The run after the entry's image went (removed, or past Modal's ttl): the entry refused, setup run."""
    assert [e["result"] for e in events(again, "setup_cache")] == ["refused", "miss"]
    assert "is no longer on the engine" in events(again, "setup_cache")[0]["reason"]


def assert_new_lock_file_misses(run_one: Any, fake_anthropic: Any, data: Path, repo: Path, first: Ran,
                                entries: int) -> None:
    """Commit a new requirements.lock (a key file) on the base and run again: setup runs under a new key, and
    the cache then holds `entries` entries."""
    from tests.conftest import git

    (repo / "requirements.lock").write_text("a==2\n")
    git(repo, "commit", "-qam", "Bump a")
    second, _ = run_one(fake_anthropic, data, repo, "two")
    assert [e["exit_code"] for e in events(second, "setup")] == [0]
    [miss] = events(second, "setup_cache")
    assert miss["result"] == "miss" and miss["key"] != events(first, "setup_cache")[0]["key"]
    assert len(SetupCache(data / "setup-cache").entries()) == entries


def assert_unpacker_refuses(launcher: Any, tmp_path: Path, through_link: str) -> None:
    """The in-sandbox unpacker of `launcher` (the second line of defence) refuses archives the host would have
    refused: a `..` entry, `through_link` (an entry below the workspace's `link` symlink), a foreign root."""
    from bot.core.errors import SandboxError

    for name, why in (("workspace/../escape", "refused 'workspace/../escape'"),
                      (through_link, "it would go through or over a symlink"),
                      ("other/x", "refused 'other/x'")):
        archive = tmp_path / "bad.tar"
        with tarfile.open(archive, "w") as tar:
            tar.addfile(tarfile.TarInfo(name), io.BytesIO(b""))
        try:
            launcher.restore_setup_cache(archive)
        except SandboxError as e:
            assert why in str(e), (name, str(e))
        else:
            raise AssertionError(f"the unpacker took {name!r}")
