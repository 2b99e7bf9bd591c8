"""Transcript links are signed with a key kept in the data dir."""

from __future__ import annotations

import stat

import pytest

from bot.config import Settings
from bot.github.links import KEY_FILE, run_link, run_path, signature, valid


def test_the_link_key_is_made_once_private_and_kept(tmp_path):
    settings = Settings(data_dir=tmp_path / "data")
    first = signature(settings, "job-1")
    key = tmp_path / "data" / KEY_FILE
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and len(key.read_bytes()) == 32
    assert signature(settings, "job-1") == first  # a restart keeps every link valid
    assert signature(Settings(data_dir=tmp_path / "other"), "job-1") != first  # another server, another key


def test_a_link_needs_the_public_url_and_carries_the_signature(tmp_path):
    assert run_link(Settings(data_dir=tmp_path), "job-7") is None
    settings = Settings(data_dir=tmp_path, public_url="https://decode.example.org")
    link = run_link(settings, "job-7")
    assert link == f"https://decode.example.org/runs/job-7?sig={signature(settings, 'job-7')}"
    assert run_path(settings, "job-7") == link.removeprefix("https://decode.example.org")


@pytest.mark.parametrize("run_id,sig", [
    ("job-8", "sig of job-7"), ("job-7", None), ("job-7", ""), ("job-7", "0" * 64), ("../job-7", "sig of job-7"),
    ("job-7/../../x", "sig of job-7"), ("job-7", "é" * 64),
])
def test_only_the_signature_of_that_run_is_valid(tmp_path, run_id, sig):
    settings = Settings(data_dir=tmp_path)
    good = signature(settings, "job-7")
    assert valid(settings, "job-7", good)
    assert not valid(settings, run_id, good if sig == "sig of job-7" else sig)
