"""`import bot.config` loads no sandbox module: the settings are a value every layer reads, and the sandbox
layer builds its spec from `settings.sandbox` on its own side (`bot.sandbox.sandbox_spec`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOADED = "import sys, bot.config; print(' '.join(sorted(m for m in sys.modules if m.startswith('bot.'))))"


def test_importing_the_settings_loads_no_sandbox_module():
    res = subprocess.run([sys.executable, "-c", LOADED], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    loaded = res.stdout.split()
    assert "bot.config" in loaded and "bot.config.table" in loaded  # the positive control: the probe sees modules
    assert not [m for m in loaded if m == "bot.sandbox" or m.startswith("bot.sandbox.")], loaded
