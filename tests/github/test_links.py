"""Transcript links are signed with a key kept in the data dir, and expire DECODE_KEEP_DAYS after they are made."""

from __future__ import annotations

import stat

import pytest

from bot.config import Settings
from bot.github.links import KEY_FILE, Link, check, run_link, run_path, signature

NOW = 1_800_000_000
IN_30_DAYS = NOW + 30 * 86400


def test_the_link_key_is_made_once_private_and_kept(tmp_path):
    settings = Settings(data_dir=tmp_path / "data")
    first = signature(settings.store, "job-1", IN_30_DAYS)
    key = tmp_path / "data" / KEY_FILE
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and len(key.read_bytes()) == 32
    assert signature(settings.store, "job-1", IN_30_DAYS) == first  # a restart keeps every link valid
    assert signature(Settings(data_dir=tmp_path / "other").store, "job-1", IN_30_DAYS) != first  # another server


def test_a_link_needs_the_public_url_and_carries_its_expiry_and_signature(tmp_path):
    bare = Settings(data_dir=tmp_path)
    assert run_link(bare.web, bare.store, "job-7") is None
    settings = Settings(data_dir=tmp_path, public_url="https://decode.example.org")
    link = run_link(settings.web, settings.store, "job-7")
    assert link is not None and link.startswith("https://decode.example.org/runs/job-7?exp=")
    sig = signature(settings.store, "job-7", IN_30_DAYS)
    assert run_path(settings.store, "job-7", now=NOW) == f"/runs/job-7?exp={IN_30_DAYS}&sig={sig}"
    shorter = Settings(data_dir=tmp_path, keep_days=2)
    assert run_path(shorter.store, "job-7", now=NOW).startswith(f"/runs/job-7?exp={NOW + 2 * 86400}&")


def test_a_link_expires_after_its_time(tmp_path):
    settings = Settings(data_dir=tmp_path)
    sig = signature(settings.store, "job-7", IN_30_DAYS)
    assert check(settings.store, "job-7", str(IN_30_DAYS), sig, now=IN_30_DAYS - 1) is Link.GOOD
    assert check(settings.store, "job-7", str(IN_30_DAYS), sig, now=IN_30_DAYS) is Link.EXPIRED
    assert check(settings.store, "job-7", str(IN_30_DAYS + 86400), sig, now=IN_30_DAYS) is Link.BAD  # not re-dated


@pytest.mark.parametrize("run_id,exp,sig", [
    ("job-8", str(IN_30_DAYS), "sig of job-7"), ("job-7", str(IN_30_DAYS), None), ("job-7", str(IN_30_DAYS), ""),
    ("job-7", str(IN_30_DAYS), "0" * 64), ("../job-7", str(IN_30_DAYS), "sig of job-7"),
    ("job-7/../../x", str(IN_30_DAYS), "sig of job-7"), ("job-7", str(IN_30_DAYS), "é" * 64),
    ("job-7", None, "sig of job-7"), ("job-7", "", "sig of job-7"), ("job-7", "-1", "sig of job-7"),
    ("job-7", "١٢", "sig of job-7"), ("job-7", f"{IN_30_DAYS}.0", "sig of job-7"),
])
def test_only_the_signature_of_that_run_and_expiry_is_valid(tmp_path, run_id, exp, sig):
    settings = Settings(data_dir=tmp_path)
    good = signature(settings.store, "job-7", IN_30_DAYS)
    assert check(settings.store, "job-7", str(IN_30_DAYS), good, now=NOW) is Link.GOOD
    assert check(settings.store, run_id, exp, good if sig == "sig of job-7" else sig, now=NOW) is Link.BAD
