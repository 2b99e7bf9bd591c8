"""The pull request's Verification section, from the `Verification` a run keeps."""

from __future__ import annotations

from bot.github.body import Report, verification_section
from bot.run.verify import Check, Verification


def test_nothing_configured_says_nothing_was_verified():
    text = verification_section(Verification())
    assert "nothing was verified by the harness" in text and "Add `verify:` to .github/decode.yml" in text
    assert Verification().verified == "none"


def test_configured_but_never_run_says_so():
    v = Verification(configured=True)
    assert v.verified == "none" and "did not run" in verification_section(v) and "stopped before" in v.line()


def test_each_command_gets_a_mark_its_duration_and_why_it_failed():
    v = Verification(True, (Check("ruff check .", 0, 0.42), Check("pytest `-q`", 2, 12.0),
                            Check("slow", None, 900.0, timed_out=True)), rounds=3, feedback=2)
    text = verification_section(v)
    assert text.startswith("**Verification** (❌ failed; `verify:` in .github/decode.yml, 3 rounds, 2 sent back")
    assert "- ✅ `ruff check .` (0.4s)\n" in text and "- ❌ `` pytest `-q` `` (12.0s): exit code 2" in text
    assert "- ❌ `slow` (900.0s): timed out after 900s" in text and "not verified" not in text
    assert v.line() == "verified: failed (1 of 3 `verify:` commands passed, 3 rounds)"


def test_a_run_stopped_after_feedback_says_its_later_changes_are_not_verified():
    v = Verification(True, (Check("pytest", 1, 1.0),), rounds=1, feedback=1)
    assert v.stale and "its later changes are not verified" in verification_section(v)


def test_the_section_sits_between_the_files_changed_and_the_figures():
    report = Report(summary="Done.", figures="| turns |", transcript="t", changes="**Files changed**",
                    verification="**Verification** (✅ passed")
    body, _ = report.texts()
    assert body.index("**Files changed**") < body.index("**Verification**") < body.index("| turns |")
