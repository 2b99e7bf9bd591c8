"""PR bodies under GitHub's 65,536-character cap, with the transcript split across comments."""

from bot.github.body import BODY_LIMIT, pull_request_texts, split_markdown

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
    body, comments = pull_request_texts(summary="Fixed it.", issue_number=7, figures=FIGURES,
                                        transcript=transcript(2, 5))
    assert comments == []
    assert body.startswith("Fixed it.\n\nFixes #7\n\n| turns | cost |")
    assert "<details><summary>Transcript</summary>" in body and "turn 1 line 4" in body


def test_a_transcript_over_65k_is_split_and_nothing_is_lost():
    text = transcript(60, 80)
    assert len(text) > 3 * BODY_LIMIT
    body, comments = pull_request_texts(summary="Done.", issue_number=3, figures=FIGURES, transcript=text)
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
    body, _ = pull_request_texts(summary="Ran the weekly task.", issue_number=None, figures=FIGURES, transcript="t\n")
    assert "Fixes #" not in body
