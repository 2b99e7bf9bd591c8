"""The front door: README.md is short, starts with what decode-bot is and the two commands a fresh
Debian machine needs, and every relative link of it and of docs/ leads to a file that exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

def test_the_readme_is_a_front_door():
    text = README.read_text()
    lines = text.splitlines()
    assert len(lines) <= 200
    first_screen = "\n".join(lines[:20])
    assert "scripts/setup && scripts/demo" in first_screen and ".ci/run" in first_screen
    assert ".venv/bin/python -m pytest -q -p no:cacheprovider -n 2 --dist loadfile" in " ".join(first_screen.split())
    for needed in ("scripts/demo-app", "(docs/architecture.md)", "pytest -m unit", "pipx install git+",
                   "uses: decode-bot/decode-bot@v1", "docker build", "(docs/settings.md)"):
        assert needed in text, needed
    assert text.index("pytest -m unit") < text.rindex(".ci/run")  # the fast tier first
    picture = re.search(r"!\[[^\]]+\]\((docs/[\w-]+\.png)\)", text)  # a run's transcript page
    assert picture and (ROOT / picture.group(1)).stat().st_size < 100_000


def test_every_relative_link_leads_somewhere():
    broken, checked = [], 0
    for page in [README, *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path = (page.parent / target.split("#")[0]).resolve()
            checked += 1
            if not path.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert checked > 20 and broken == []
