"""The test pyramid: every collected test carries exactly one of the tiers `unit`, `integration` and
`e2e` (assigned in tests/conftest.py), so `pytest -m unit` and friends split the suite without gaps."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import TIERS

ROOT = Path(__file__).resolve().parents[1]
# Collects the whole suite in a fresh interpreter and prints each test's tier markers as JSON.
COLLECT = """
import json, sys
import pytest

class Tiers:
    items = {}
    def pytest_collection_finish(self, session):
        for item in session.items:
            self.items[item.nodeid] = [m.name for m in item.iter_markers() if m.name in TIERS]

tiers = Tiers()
code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "tests"], plugins=[tiers])
print("TIERS " + json.dumps(tiers.items))
sys.exit(code)
"""


def collected_tiers() -> dict[str, list[str]]:
    res = subprocess.run([sys.executable, "-c", f"TIERS = {TIERS!r}\n{COLLECT}"], cwd=ROOT,
                         capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    [line] = [line for line in res.stdout.splitlines() if line.startswith("TIERS ")]
    return json.loads(line.removeprefix("TIERS "))


def test_every_test_has_exactly_one_tier():
    tiers = collected_tiers()
    assert len(tiers) > 500
    wrong = {nodeid: marks for nodeid, marks in tiers.items() if len(marks) != 1}
    assert not wrong, wrong
    counts = {tier: sum(marks == [tier] for marks in tiers.values()) for tier in TIERS}
    assert all(counts.values()), counts  # each tier holds tests
    assert "tests/test_markers.py::test_every_test_has_exactly_one_tier" in tiers
