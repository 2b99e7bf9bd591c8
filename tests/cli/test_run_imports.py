"""What `decode run` loads before its first model request: a scripted model never loads the anthropic SDK
(over a second of imports), and a real model's SDK loads on a thread beside the rest (issue 26)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import make_repo

ROOT = Path(__file__).resolve().parents[2]
DONE = [[{"type": "text", "text": "Nothing to do."}]]


def imported(stderr: str) -> set[str]:
    """The modules `python -X importtime` reports in `stderr`."""
    return {line.split("|")[-1].strip() for line in stderr.splitlines() if line.startswith("import time:")}


def test_decode_run_with_a_scripted_model_never_imports_the_sdk(tmp_path):
    repo = make_repo(tmp_path / "repo", {"a.py": "a = 1\n"})
    session = tmp_path / "session.json"
    session.write_text(json.dumps(DONE))
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT),
           "SANDBOX_MODE": "local", "DECODE_DATA_DIR": str(tmp_path / "data"), "DECODE_MODEL": f"scripted:{session}"}
    res = subprocess.run([sys.executable, "-X", "importtime", "-m", "bot.cli", "run", "--repo", str(repo), "Look"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "result: completed" in res.stdout or "result: nothing" in res.stdout, res.stdout
    modules = imported(res.stderr)
    assert "bot.run.pipeline" in modules  # the report is read right
    assert not {m for m in modules if m.split(".")[0] == "anthropic" or m == "bot.model.anthropic"}


def test_a_real_models_sdk_loads_on_a_thread_while_the_caller_goes_on(tmp_path):
    script = textwrap.dedent("""
        import sys, threading, time
        from bot.config import Settings
        from bot.model import preload
        preload(Settings(model="scripted:none.json").model)
        assert not threading.enumerate()[1:], "a scripted model started a thread"
        started = time.perf_counter()
        preload(Settings(model="claude-sonnet-4-5").model)
        returned = time.perf_counter() - started
        loading = any(thread.is_alive() for thread in threading.enumerate()[1:])
        for thread in threading.enumerate()[1:]:
            thread.join()
        print(returned, loading, "bot.model.anthropic" in sys.modules)
    """)
    res = subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    returned, loading, loaded = res.stdout.split()
    assert float(returned) < 0.2 and loading == "True" and loaded == "True"
