"""The CLI's last guard (bot/cli `unexpected`): an error no check foresaw is one line, never a traceback on the
terminal; a bug's traceback is kept in a private file the line names, for the report."""

from __future__ import annotations

import re
from pathlib import Path

from bot.cli import unexpected


def test_a_bug_is_one_line_naming_the_file_that_keeps_its_traceback(capsys):
    try:
        {}["missing"]
    except KeyError as e:
        status = unexpected(e)
    err = capsys.readouterr().err
    assert status == 1 and err.count("\n") == 1 and "Traceback" not in err
    found = re.fullmatch(r"decode: unexpected KeyError: 'missing'; this is a bug in decode-bot: please report it with "
                         r"(\S+), which holds its traceback\n", err)
    assert found, err
    report = Path(found.group(1))
    try:
        assert "Traceback" in report.read_text() and 'KeyError: \'missing\'' in report.read_text()
        assert report.stat().st_mode & 0o777 == 0o600
    finally:
        report.unlink()


def test_an_os_error_on_a_path_names_the_path_and_is_exit_2(capsys, tmp_path):
    e = PermissionError(13, "Permission denied", str(tmp_path / "runs"))
    assert unexpected(e) == 2
    assert capsys.readouterr().err == (f"decode: {tmp_path / 'runs'}: Permission denied: check that this user may "
                                       "write there (DECODE_DATA_DIR, or the path given)\n")
