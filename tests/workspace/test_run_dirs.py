"""What a run leaves on disk: after publishing, no clone; transcripts and a small record, pruned
DECODE_KEEP_DAYS after their last write; work that was not published keeps its clone until then."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from bot.workspace.run_dirs import DAY_S, prune
from tests.conftest import git
from tests.support.github_job import OWNER, NAME, SESSION, delivery, run, world  # noqa: F401 (fixture)
from tests.support.cli import buggy_repo, decode_run, printed  # noqa: F401 (fixture)

NOTE = [[{"type": "tool_use", "name": "bash", "input": {"command": "echo noted > NOTES.md"}}],
        [{"type": "text", "text": "Noted."}]]


def age(path: Path, days: float) -> None:
    """Make `path` and its direct entries look last written `days` ago."""
    when = time.time() - days * DAY_S
    for p in (*path.iterdir(), path):
        os.utime(p, (when, when), follow_symlinks=False)


def sizes(run_dir: Path) -> dict[str, int]:
    return {p.name: sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p.is_dir() else p.stat().st_size
            for p in run_dir.iterdir()}


def test_prune_takes_runs_past_their_days_and_nothing_else(tmp_path):
    runs = tmp_path / "runs"
    for name in ("old", "recent", "old-but-still-writing"):
        (runs / name).mkdir(parents=True)
        (runs / name / "transcript.jsonl").write_text("{}\n")
    age(runs / "old", 31)
    age(runs / "recent", 29)
    age(runs / "old-but-still-writing", 40)
    os.utime(runs / "old-but-still-writing" / "transcript.jsonl")  # appended to just now
    (runs / "stray-file").write_text("not a run")
    assert prune(runs, 30) == ["old"]
    assert sorted(p.name for p in runs.iterdir()) == ["old-but-still-writing", "recent", "stray-file"]
    assert prune(tmp_path / "no-runs-yet", 30) == []


def test_prune_walks_the_runs_at_most_once_an_hour_whatever_the_number_of_runs_starting(tmp_path):
    runs = tmp_path / "runs"
    (runs / "a").mkdir(parents=True)
    assert prune(runs, 30) == []  # a pass: nothing old yet
    age(runs / "a", 31)
    assert prune(runs, 30) == []  # the next run, minutes later: no second pass
    assert prune(runs, 30, now=time.time() + 3601) == ["a"]


def test_a_local_run_leaves_transcripts_and_a_record_and_prunes_old_runs(fake_anthropic, tmp_path,
                                                                          buggy_repo):  # noqa: F811
    old = tmp_path / "data" / "runs" / "from-last-month"
    (old / "clean").mkdir(parents=True)
    (old / "clean" / "big.bin").write_bytes(b"x" * 1_000_000)
    age(old, 31)
    fake_anthropic.script(NOTE)
    res = decode_run(fake_anthropic, tmp_path, buggy_repo, "Take notes")
    assert res.returncode == 0, res.stderr
    assert not old.exists()
    run_dir = Path(printed(res.stdout, "transcript")).parent
    assert sorted(p.name for p in run_dir.iterdir()) == ["record.json", "transcript.jsonl", "transcript.md"]
    assert sum(sizes(run_dir).values()) < 100_000
    record = json.loads((run_dir / "record.json").read_text())
    branch = printed(res.stdout, "branch")
    assert record["branch"] == branch and record["commit"] == git(buggy_repo, "rev-parse", branch)
    assert record["stop_reason"] == "completed" and record["changed"] == ["NOTES.md"]
    assert printed(res.stdout, "repository") == str(buggy_repo)  # the branch was delivered there


def test_keep_days_is_a_setting(fake_anthropic, tmp_path, buggy_repo):  # noqa: F811
    kept = tmp_path / "data" / "runs" / "from-last-month"
    kept.mkdir(parents=True)
    age(kept, 31)
    fake_anthropic.script(NOTE)
    res = decode_run(fake_anthropic, tmp_path, buggy_repo, "Take notes", DECODE_KEEP_DAYS="60")
    assert res.returncode == 0, res.stderr
    assert kept.exists()
    res = decode_run(fake_anthropic, tmp_path, buggy_repo, "Take notes", DECODE_KEEP_DAYS="0")
    assert res.returncode == 2 and "DECODE_KEEP_DAYS='0' is not valid" in res.stderr


def test_work_that_lives_only_in_the_run_keeps_its_clone(fake_anthropic, tmp_path, buggy_repo):  # noqa: F811
    fake_anthropic.script(NOTE)
    res = decode_run(fake_anthropic, tmp_path, f"file://{buggy_repo}", "Take notes")  # nowhere to deliver to
    assert res.returncode == 0, res.stderr
    clone = Path(printed(res.stdout, "repository"))
    assert clone.name == "clean" and git(clone, "show", f"{printed(res.stdout, 'branch')}:NOTES.md") == "noted"


def test_a_published_github_run_drops_its_clone(world):  # noqa: F811
    fake, anthropic, settings, *_ = world
    number = fake.add_issue(OWNER, NAME, "Weekend check is wrong", "Saturdays count as workdays.", user="alice")
    anthropic.script(SESSION["turns"])
    conclusion = run(world, "issues", delivery("issues", "labeled", issue__number=number, label__name="agent"))
    assert conclusion.state == "success", conclusion.message
    run_dir = conclusion.ran.run_dir
    assert sorted(p.name for p in run_dir.iterdir()) == ["record.json", "transcript.jsonl", "transcript.md"]
