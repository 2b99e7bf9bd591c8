"""PR bodies under GitHub's 65,536-character cap, with the transcript split across comments."""

from bot.github.body import BODY_LIMIT, MAX_COMMENTS, Report, split_markdown
from bot.github.notes import files_changed

FIGURES = "| turns | cost |\n| --- | --- |\n| 3 | $0.10 |"


def transcript(n_turns: int, output_lines: int) -> str:
    out = ["# decode-bot transcript", ""]
    for t in range(n_turns):
        out += [f"## Turn {t}", "", "**bash**", "", "````bash", f"pytest -k case_{t}", "````", "", "result:", "", "````text"]
        out += [f"turn {t} line {i}: " + "x" * 40 for i in range(output_lines)]
        out += ["````", ""]
    return "\n".join(out) + "\n"


def is_subsequence(needles: list[str], haystack: list[str]) -> bool:
    it = iter(haystack)
    return all(any(n == h for h in it) for n in needles)


def test_a_small_transcript_fits_in_the_body():
    body, comments = Report(summary="Fixed it.", figures=FIGURES, transcript=transcript(2, 5)).texts(closes=7)
    assert comments == []
    assert body.startswith("Fixed it.\n\nFixes #7\n\n| turns | cost |")
    assert "<details><summary>Transcript</summary>" in body and "turn 1 line 4" in body


def test_a_transcript_over_65k_is_split_and_nothing_is_lost():
    text = transcript(60, 80)
    assert len(text) > 3 * BODY_LIMIT
    body, comments = Report(summary="Done.", figures=FIGURES, transcript=text).texts(closes=3)
    assert len(body) <= BODY_LIMIT and all(len(c) <= BODY_LIMIT for c in comments)
    assert len(comments) >= 3
    assert "Fixes #3" in body and "part 1 of" in body
    combined = "\n".join([body, *comments]).splitlines()
    assert is_subsequence(text.splitlines(), combined)


def test_every_part_has_balanced_fences():
    for part in split_markdown(transcript(30, 80), 20_000):
        fences = [line for line in part.splitlines() if line.startswith("````")]
        assert len(fences) % 2 == 0, part[:200]


def test_a_single_huge_line_is_cut_not_dropped():
    text = "start\n" + "y" * 200_000 + "\nend\n"
    parts = split_markdown(text, 60_000)
    assert all(len(p) <= 60_000 for p in parts)
    assert "".join(parts).replace("\n", "") == text.replace("\n", "")


def test_no_issue_means_no_fixes_line():
    report = Report(summary="Ran the weekly task.", figures=FIGURES, transcript="t\n")
    assert "Fixes #4" in report.texts(closes=4)[0]  # the line this test looks for, when there is an issue
    body, _ = report.texts()
    assert "Fixes #" not in body


def test_with_a_transcript_page_a_long_transcript_is_cut_to_one_body_that_links_there():
    url = "https://decode.example/runs/job-3?exp=1767312000&sig=abc"
    body, comments = Report(summary="Done.", figures=FIGURES, transcript=transcript(60, 80),
                            transcript_url=url).texts(closes=3)
    assert comments == [] and len(body) <= BODY_LIMIT
    assert f"[The full transcript]({url})" in body and f"the rest is in [the full transcript]({url})" in body
    assert body.count("| turns | cost |") == 1 and body.count("Done.") == 1


def test_the_body_lists_the_files_changed_once_before_the_figures():
    numstat = b"3\t1\tcalendar_utils.py\x00-\t-\tlogo.png\x00120\t0\ttests/test_`weird`.py\x00"
    changes = files_changed(numstat)
    assert changes.startswith("**Files changed** (3 files, +123 −1):")
    assert "- `calendar_utils.py` +3 −1" in changes and "- `logo.png` (binary)" in changes
    assert "- ``tests/test_`weird`.py`` +120 −0" in changes  # a backtick in a name cannot close its span
    body, _ = Report(summary="Fixed.", figures=FIGURES, transcript="t\n", changes=changes).texts()
    assert body.index("**Files changed**") < body.index("| turns |") and body.count("calendar_utils.py") == 1
    assert files_changed(b"") == ""


def test_a_very_long_transcript_without_a_page_is_cut_after_a_bounded_number_of_comments():
    text = transcript(2000, 20)
    body, comments = Report(summary="Done.", figures=FIGURES, transcript=text).texts(closes=3)
    assert len(comments) == MAX_COMMENTS and all(len(c) <= BODY_LIMIT for c in [body, *comments])
    assert "the whole transcript is in `transcript.md`" in comments[-1] and "## Turn 0" in body
