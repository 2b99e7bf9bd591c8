"""decode-bot's own evaluation set: four real small bugs in small repositories, and the task file.

    python3 bench/eval/build.py DIR
    DECODE_MODEL=scripted:bench/eval/sessions.json SANDBOX_MODE=bwrap decode eval DIR/TASKS.jsonl --parallel 2

makes DIR/repos/<name> (git repositories, one commit each) and DIR/TASKS.jsonl, then prints the command
above. sessions.json holds a scripted session for each task the model is asked (picked by a text of the
task, see bot/model/scripted.py), so the set runs without an API key: two are fixed (`resolved`), one is
fixed wrongly (`unresolved`), and one task's check already passes on the base (`invalid`, never asked).
With a real key (ANTHROPIC_API_KEY, no DECODE_MODEL) the same file measures the model. docs/eval.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

PAGER = {
    "pager.py": '''"""Split a list of items into pages."""


def page_count(total: int, per_page: int) -> int:
    """How many pages `total` items fill at `per_page` a page."""
    if per_page < 1:
        raise ValueError("per_page must be 1 or more")
    return total // per_page


def page(items: list, number: int, per_page: int) -> list:
    """The items on page `number` (1-based)."""
    start = (number - 1) * per_page
    return items[start:start + per_page]
''',
    "tests/test_pager.py": '''import unittest

from pager import page, page_count


class PageCount(unittest.TestCase):
    def test_exact_pages(self):
        self.assertEqual(page_count(9, 3), 3)

    def test_partial_last_page(self):
        self.assertEqual(page_count(10, 3), 4)

    def test_no_items(self):
        self.assertEqual(page_count(0, 3), 0)

    def test_last_page(self):
        self.assertEqual(page(list(range(10)), 4, 3), [9])
''',
}

SLUG = {
    "bin/slug.sh": '''#!/bin/sh
# Print a URL slug for the title in $1: lower case, words joined by dashes.
printf '%s\\n' "$1" | tr 'A-Z' 'a-z' | tr ' ' '-'
''',
    "README.md": "# slug\n\n`sh bin/slug.sh 'Hello, World!'` prints `hello-world`.\n",
}

LEAP = {
    "leap.py": '''def is_leap(year: int) -> bool:
    """Whether `year` has a 29th of February (Gregorian calendar)."""
    return year % 4 == 0
''',
    "tests/test_leap.py": '''import unittest

from leap import is_leap


class Leap(unittest.TestCase):
    def test_every_fourth_year(self):
        self.assertTrue(is_leap(2024))
        self.assertFalse(is_leap(2023))

    def test_centuries(self):
        self.assertFalse(is_leap(1900))
        self.assertTrue(is_leap(2000))
''',
}

REPOS = {"pager": PAGER, "slug": SLUG, "leap": LEAP}
UNITTEST = "python3 -m unittest discover -s tests"

# id, repository, task, check (the repository's path and the base, main, are filled in by `build`)
TASKS = [
    ("pager-off-by-one", "pager", "page_count(10, 3) returns 3, but ten items at three a page fill 4 pages: fix "
     "pager.page_count so that a partly filled last page counts.", UNITTEST),
    ("slug-punctuation", "slug", "bin/slug.sh keeps punctuation: `sh bin/slug.sh 'Hello, World!'` prints "
     "`hello,-world!` instead of `hello-world`. Make it drop everything but letters and digits, one dash between "
     "words.", "test \"$(sh bin/slug.sh 'Hello, World!')\" = hello-world && "
     "test \"$(sh bin/slug.sh 'Ready? Set. Go')\" = ready-set-go"),
    ("pager-exact-pages", "pager", "page_count(9, 3) must be 3.", UNITTEST + " -k exact_pages"),
    ("leap-centuries", "leap", "is_leap(1900) is True, but 1900 was not a leap year: fix is_leap for the "
     "Gregorian calendar's century rule.", UNITTEST),
]

GIT_ENV = {"GIT_AUTHOR_NAME": "eval", "GIT_AUTHOR_EMAIL": "eval@example.com", "GIT_COMMITTER_NAME": "eval",
           "GIT_COMMITTER_EMAIL": "eval@example.com", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}


def make_repo(path: Path, files: dict[str, str]) -> None:
    """A git repository at `path` with `files` committed on main."""
    env = {**os.environ, **GIT_ENV}
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=path, env=env, check=True)
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    subprocess.run(["git", "add", "-A"], cwd=path, env=env, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "initial commit"], cwd=path, env=env, check=True)


def build(target: Path) -> Path:
    """The repositories under `target/repos` and the task file `target/TASKS.jsonl`; its path."""
    for name, files in REPOS.items():
        make_repo(target / "repos" / name, files)
    tasks = target / "TASKS.jsonl"
    tasks.write_text("".join(json.dumps({"id": id_, "repo": str((target / "repos" / repo).resolve()),
                                         "base": "main", "task": task, "check": check}) + "\n"
                             for id_, repo, task, check in TASKS))
    return tasks


def main() -> int:
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        print("usage: python3 bench/eval/build.py DIR", file=sys.stderr)
        return 2
    target = Path(sys.argv[1])
    if target.exists() and any(target.iterdir()):
        print(f"{target} is not empty: give a new directory", file=sys.stderr)
        return 2
    tasks = build(target)
    sessions = Path(__file__).resolve().with_name("sessions.json")
    print(f"wrote {tasks}; run it with:\n  DECODE_MODEL=scripted:{sessions} SANDBOX_MODE=bwrap decode eval {tasks} "
          "--parallel 2")
    return 0


if __name__ == "__main__":
    sys.exit(main())
