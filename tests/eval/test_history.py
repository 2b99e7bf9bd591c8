"""`decode eval --from-history` against the fake GitHub: merged pull requests that changed tests become
tasks (base: the commit before the fix, task: the closed issue's text, check: the merged tests), the others
are passed over with the reason; the task file it writes then runs through `decode eval` and the scripted
fix resolves it, in the sandbox, on a clone from the fake GitHub."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from bot.eval.history import check_command, is_test_file
from tests.eval.test_eval import decode_eval
from tests.fakes.github import FakeGitHub

BUGGY = '''def page_count(total, per_page):
    return total // per_page
'''
FIXED = BUGGY.replace("total // per_page", "-(-total // per_page)")
OLD_TEST = '''import unittest

from pager import page_count


class Pages(unittest.TestCase):
    def test_exact(self):
        self.assertEqual(page_count(9, 3), 3)
'''
NEW_TEST = OLD_TEST + '''
    def test_partial_page(self):
        self.assertEqual(page_count(10, 3), 4)
'''
UNITTEST = "python3 -m unittest discover -s tests"
ISSUE = "The last page goes missing when it is not full"
SESSION = {"sessions": [{"when": ISSUE, "turns": [
    [{"type": "tool_use", "name": "edit", "input": {"path": "pager.py", "old_string": "total // per_page",
                                                     "new_string": "-(-total // per_page)"}}],
    "page_count now rounds up."]}]}


def history_of(fake: FakeGitHub) -> dict[str, int]:
    """octo/pager with four merged pull requests and one closed unmerged: only the fix with tests makes a task."""
    fake.add_repo("octo", "pager", {"pager.py": BUGGY, "tests/test_pager.py": OLD_TEST, "pyproject.toml": "",
                                    ".github/decode.yml": f"verify: {UNITTEST}\n"})
    issue = fake.add_issue("octo", "pager", ISSUE, "page_count(10, 3) is 3; it should be 4.")
    numbers = {"fix": fake.add_merged_pull("octo", "pager", "Count the partial page", f"Fixes #{issue}.",
                                           files={"pager.py": FIXED, "tests/test_pager.py": NEW_TEST})}
    numbers["docs"] = fake.add_merged_pull("octo", "pager", "Docs", files={"README.md": "# pager\n"})
    numbers["tests"] = fake.add_merged_pull("octo", "pager", "More tests",
                                            files={"tests/test_more.py": "def test_x():\n    pass\n"})
    fake.push_branch("octo", "pager", "idea", {"idea.py": "x = 1\n"})
    unmerged = fake.add_pull("octo", "pager", "An idea", head_branch="idea")
    fake.repo("octo", "pager").issues[unmerged]["state"] = "closed"
    return numbers


def test_merged_pull_requests_with_tests_become_tasks_that_run(fake_github, tmp_path):
    numbers = history_of(fake_github)
    base = fake_github.pull("octo", "pager", numbers["fix"])["base"]["sha"]
    github = {"GITHUB_TOKEN": fake_github.token, "GITHUB_API_URL": fake_github.api_url}
    done = decode_eval(tmp_path, "--from-history", "octo/pager", "--limit", "5", "--write", "tasks.jsonl", **github)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "wrote 1 task from octo/pager's merged pull requests to tasks.jsonl"
    assert f"#{numbers['docs']}: passed over: it changed no test files" in done.stderr
    assert f"#{numbers['tests']}: passed over: it changed only tests" in done.stderr
    [task] = [json.loads(line) for line in (tmp_path / "tasks.jsonl").read_text().splitlines()]
    assert task["id"] == f"octo/pager#{numbers['fix']}" and task["repo"] == "octo/pager"
    assert task["base"] == base != fake_github.branch_sha("octo", "pager", "main")
    assert task["task"] == f"{ISSUE}\n\npage_count(10, 3) is 3; it should be 4."
    assert "test_partial_page" in task["check"] and task["check"].endswith(f"( {UNITTEST} )"), "decode.yml's verify"
    assert "-(-total" not in task["check"], "the fix itself is not in the check"
    assert fake_github.token not in (tmp_path / "tasks.jsonl").read_text()

    (tmp_path / "session.json").write_text(json.dumps(SESSION))
    ran = decode_eval(tmp_path, "tasks.jsonl", "--out", "out", DECODE_MODEL=f"scripted:{tmp_path / 'session.json'}",
                      **github)
    assert ran.returncode == 0, ran.stderr[-3000:]
    [result] = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert result["status"] == "resolved", ran.stderr[-3000:]
    assert "resolved 1 of 1 (100%)" in ran.stdout
    base_check = (tmp_path / "out" / "checks").rglob("transcript.jsonl")
    assert any("FAILED (failures=1)" in path.read_text() for path in base_check), "the merged test failed on the base"
    assert fake_github.token not in ran.stdout + ran.stderr + (tmp_path / "out" / "results.jsonl").read_text()
    # the check on the base kept a checkout beside the mirror, and the run took it
    assert "the checkout an earlier run kept beside the mirror" in Path(result["transcript"]).read_text()


def test_a_pull_request_closing_an_issue_that_is_gone_keeps_its_own_text(fake_github, tmp_path):
    fake_github.add_repo("octo", "pager", {"pager.py": BUGGY, "tests/test_pager.py": OLD_TEST})
    fake_github.add_merged_pull("octo", "pager", "Count the partial page", "Fixes #99, which was deleted.",
                                files={"pager.py": FIXED, "tests/test_pager.py": NEW_TEST})
    done = decode_eval(tmp_path, "--from-history", "octo/pager", "--write", "tasks.jsonl",
                       GITHUB_TOKEN=fake_github.token, GITHUB_API_URL=fake_github.api_url)
    assert done.returncode == 0, done.stderr
    [task] = [json.loads(line) for line in (tmp_path / "tasks.jsonl").read_text().splitlines()]
    assert task["task"] == "Count the partial page\n\nFixes #99, which was deleted."
    assert task["check"].endswith("python3 -m pytest -q tests/test_pager.py"), "no decode.yml: the guess"


@pytest.mark.parametrize("text", ["plain\n", "no newline at the end", "", "$HOME `id` '\"quotes\"' \\n\nEOF\n"])
def test_the_check_writes_the_merged_test_files_byte_for_byte_then_runs_the_command(tmp_path, text):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "old.py").write_text("gone")
    command = check_command({"tests/a b/t.py": text, "top.txt": "x\n"}, ["tests/old.py"], "echo ran")
    done = subprocess.run(["sh", "-c", command], cwd=tmp_path, capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (0, "ran\n"), done.stderr
    written = (tmp_path / "tests" / "a b" / "t.py").read_text()
    assert written == (text if text.endswith("\n") or not text else text + "\n")
    assert not (tmp_path / "tests" / "old.py").exists() and (tmp_path / "top.txt").read_text() == "x\n"


@pytest.mark.parametrize("path, is_test", [
    ("tests/test_pager.py", True), ("src/pkg/test_util.py", True), ("pkg/util_test.go", True),
    ("web/app.spec.ts", True), ("src/Button.test.jsx", True), ("spec/models/user_spec.rb", True),
    ("src/test/java/FooTest.java", True), ("pager.py", False), ("docs/testing.md", False), ("contest.py", False),
])
def test_test_files_are_told_by_their_directory_or_name(path, is_test):
    assert is_test_file(path) is is_test


def test_a_repository_the_token_cannot_read_is_one_line_and_exit_2(fake_github, tmp_path):
    done = decode_eval(tmp_path, "--from-history", "octo/missing", "--write", "tasks.jsonl",
                       GITHUB_TOKEN=fake_github.token, GITHUB_API_URL=fake_github.api_url)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "the repository octo/missing cannot be read with this token" in done.stderr
    assert not (tmp_path / "tasks.jsonl").exists()
