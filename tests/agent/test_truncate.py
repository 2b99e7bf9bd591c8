from bot.agent.truncate import MAX_BYTES, truncate


def test_small_output_is_untouched():
    assert truncate("line 1\nline 2\n") == "line 1\nline 2\n"


def test_many_lines_keep_head_and_tail_with_a_note():
    text = "".join(f"line {i}\n" for i in range(10_000))
    out = truncate(text)
    assert out.startswith("line 0\nline 1\n")
    assert out.endswith("line 9999\n")
    assert "line 5000\n" not in out
    assert "8000 lines" in out and "omitted" in out


def test_one_huge_line_is_cut_by_bytes():
    text = "a" * 400_000 + "END"
    out = truncate(text)
    assert len(out.encode()) < MAX_BYTES + 500
    assert out.endswith("END")
    assert "omitted" in out


def test_multibyte_text_is_not_broken():
    out = truncate("é" * 200_000)
    out.encode("utf-8")  # valid text, no split code points
    assert "omitted" in out
