"""`decode serve --host` with a name that does not resolve: one line naming the flag and the fix, exit 2, through
the real console script (waitress's own lookup failed as a bare ValueError traceback)."""

from __future__ import annotations

import os
import subprocess

from tests.support.cli import DECODE


def test_a_host_that_does_not_resolve_is_one_line_and_exit_2(tmp_path):
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), "DECODE_DATA_DIR": str(tmp_path / "data")}
    done = subprocess.run([DECODE, "serve", "--host", "nosuch.invalid", "--port", "8080"], env=env,
                          capture_output=True, text=True, timeout=120)  # setup mode: no credentials needed
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("decode: --host nosuch.invalid: ") and line.endswith(
        ": give an address of this machine (127.0.0.1, 0.0.0.0, ::) or a name that resolves to one")
