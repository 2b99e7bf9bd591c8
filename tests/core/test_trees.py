"""`remove_tree` as a non-root bot runs it (root is refused nothing, so the tests run it as `nobody`): what
a build or the agent locked goes, what a link points at is left as it was, and what is another user's is
said, not raised."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOBODY = 65534
REMOVE = ("import logging, sys; logging.basicConfig(); sys.path.insert(0, sys.argv[1]); "
          "from bot.core.trees import remove_tree; remove_tree(sys.argv[2]); print('returned')")


@pytest.fixture
def place() -> Iterator[Path]:
    """A directory `nobody` can reach, holding a readable copy of bot/core (tmp_path is root's, 0700)."""
    if os.geteuid() != 0:
        pytest.skip("acting as another user needs root (CI runs as root)")
    base = Path(tempfile.mkdtemp(prefix="decode-trees-"))
    shutil.copytree(ROOT / "bot" / "core", base / "code" / "bot" / "core", ignore=shutil.ignore_patterns("__pycache__"))
    (base / "code" / "bot" / "__init__.py").touch()
    os.chmod(base, 0o755)
    yield base
    shutil.rmtree(base)


def as_nobody(*command: str, place: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["/usr/bin/python3", "-I", *command], user=NOBODY, group=NOBODY, cwd=place,
                          capture_output=True, text=True, timeout=60)


def nobodys(place: Path, shell: str) -> Path:
    """`place/home/top`, made by `nobody` running `shell` in it (nobody's home: a bot's run directory)."""
    top = place / "home" / "top"
    top.mkdir(parents=True)
    for mine in (top, top.parent):
        os.chown(mine, NOBODY, NOBODY)
    made = subprocess.run(["sh", "-ec", shell], cwd=top, user=NOBODY, group=NOBODY, capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    return top


def test_what_the_agent_locked_goes_and_a_link_out_is_not_followed(place: Path) -> None:
    outside = place / "outside"  # nobody's own, locked too: a chmod through the link would open it
    outside.mkdir()
    (outside / "kept").write_text("kept")
    os.chown(outside, NOBODY, NOBODY)
    os.chmod(outside, 0o500)
    top = nobodys(place, f"mkdir -p go/pkg/mod/m@v1/sub && echo x > go/pkg/mod/m@v1/sub/f.go && chmod -R a-w go && "
                         f"mkdir -p gone/deep && touch gone/deep/f && chmod 000 gone && ln -s {outside} out && "
                         f"chmod 555 .")
    assert subprocess.run(["runuser", "-u", "nobody", "--", "rm", "-rf", str(top)]).returncode != 0  # what was wrong

    done = as_nobody("-c", REMOVE, str(place / "code"), str(top), place=place)

    assert done.stdout == "returned\n" and done.stderr == ""
    assert not os.path.lexists(top)
    assert (outside / "kept").read_text() == "kept" and outside.stat().st_mode & 0o777 == 0o500


def test_what_is_another_users_is_logged_and_the_rest_goes(place: Path) -> None:
    top = nobodys(place, "mkdir -p mine/sub && echo x > mine/sub/f && chmod -R a-w mine")
    theirs = top / "theirs"  # root's, in nobody's tree: nobody may not empty it
    theirs.mkdir()
    (theirs / "f").write_text("root's")

    done = as_nobody("-c", REMOVE, str(place / "code"), str(top), place=place)

    assert done.stdout == "returned\n"
    assert f"could not remove all of {top}" in done.stderr and "Permission denied" in done.stderr
    assert sorted(p.name for p in top.iterdir()) == ["theirs"] and (theirs / "f").read_text() == "root's"
