"""A clone or fetch whose remote answers 5xx, or breaks off, is tried again (bot/workspace/git_retry.py); one the
remote refuses for good is not. Real git against the fake GitHub's smart HTTP, its faults injected there."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from bot.core.errors import DecodeError
from bot.workspace.clone import prepare
from bot.workspace.git_retry import retryable

FILES = {"README.md": "# demo\n"}


def info_refs(fake_github) -> int:
    return len(fake_github.calls("GET", r"/acme/widgets\.git/info/refs"))


def test_a_clone_that_gets_502_twice_is_tried_again_and_succeeds(fake_github, tmp_path: Path, caplog):
    fake_github.add_repo("acme", "widgets", FILES)
    fake_github.inject("GET", r"widgets\.git/info/refs", 502, times=2)
    with caplog.at_level(logging.WARNING, logger="bot.workspace.clone"):
        ws = prepare(fake_github.git_url("acme", "widgets"), tmp_path / "run", "decode/run-1", token=fake_github.token)
    assert (ws.path / "README.md").read_text() == "# demo\n"
    assert info_refs(fake_github) == 3
    assert [r.getMessage().split(" (")[0] for r in caplog.records] == ["cloning " + fake_github.git_url(
        "acme", "widgets") + " failed"] * 2, caplog.text
    assert fake_github.token not in caplog.text


def test_a_remote_that_keeps_failing_fails_after_three_tries_with_gits_reason(fake_github, tmp_path: Path):
    fake_github.add_repo("acme", "widgets", FILES)
    fake_github.inject("GET", r"widgets\.git/info/refs", 503, times=5)
    with pytest.raises(DecodeError, match=r"The requested URL returned error: 503"):
        prepare(fake_github.git_url("acme", "widgets"), tmp_path / "run", "decode/run-1", token=fake_github.token)
    assert info_refs(fake_github) == 3


def test_a_repository_that_is_not_there_is_not_tried_again(fake_github, tmp_path: Path):
    fake_github.add_repo("acme", "other", FILES)
    with pytest.raises(DecodeError):
        prepare(fake_github.git_url("acme", "widgets"), tmp_path / "run", "decode/run-1", token=fake_github.token)
    assert info_refs(fake_github) == 1


def test_only_commands_that_talk_to_a_remote_are_retried():
    broke = "fatal: the remote end hung up unexpectedly"
    assert retryable(["-c", "fetch.unpackLimit=1", "fetch", "--quiet", "origin"], broke)
    assert retryable(["push", "--quiet", "--", "https://x/y.git", "HEAD:refs/heads/b"], "error: RPC failed; HTTP 502")
    assert not retryable(["commit", "-m", "x"], broke), "a local command is not retried"
    assert not retryable(["clone", "https://x/y.git"], "fatal: Authentication failed for 'https://x/y.git/'")
    assert not retryable(["clone", "https://x/y.git"], "The requested URL returned error: 404")
