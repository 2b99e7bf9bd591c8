"""`decode eval --from-history`: tasks made from a repository's merged pull requests that changed tests.

Each such pull request becomes one task: its `base` is the commit the pull request started from (so its
fix, and every other non-test change, is not there), its `task` the text of the issue it closes
("Fixes #N", "Closes #N", "Resolves #N") or else its own title and body, and its `check` a self-contained
shell command that writes the pull request's test files as they were merged (heredocs, so the line holds
them whole and the check needs nothing but the repository) and runs them with the repository's own test
command: its decode.yml `verify:` commands at the base when it has them, else a guess: `go test ./...` with a
go.mod, `cargo test` with a Cargo.toml, `npm test` with a package.json, else `python3 -m pytest` on the
changed Python test files. The test files are written, not
patched, so whatever the agent did to them, the check runs the merged ones. Pull requests that change only
tests, or no tests, or whose test files are not text (or over 256 KB together) are passed over; docs/eval.md
says how to edit the file by hand.
"""

from __future__ import annotations

import re
import secrets
import shlex
from collections.abc import Callable
from pathlib import PurePosixPath

from github import GithubException

from bot.core.errors import ConfigError, DecodeError
from bot.eval.tasks import Task
from bot.github.forge import GitHubForge
from bot.github.info import MergedPull
from bot.run.repo_config import PATH as CONFIG_PATH
from bot.run.repo_config import config_of

MAX_TEST_BYTES = 256 * 1024
SCAN_PER_TASK = 10  # closed pull requests read for each task asked for: most are not merged test changes
_CLOSES = re.compile(r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\s*:?\s+#(\d+)\b", re.IGNORECASE)
_TEST_DIR = re.compile(r"(^|/)(tests?|__tests__|spec|testing)/")
_TEST_NAME = re.compile(r"(^test_.*\.py$|_test\.(py|go)$|\.(test|spec)\.[cm]?[jt]sx?$|Tests?\.(java|kt|cs)$"
                        r"|_spec\.rb$|_test\.rb$)")
_COMMANDS = (("go.mod", "go test ./..."), ("Cargo.toml", "cargo test"), ("package.json", "npm test"))


def is_test_file(path: str) -> bool:
    """Whether `path` looks like a test file (a tests/ or spec/ directory, or a test file's name)."""
    return bool(_TEST_DIR.search(path) or _TEST_NAME.search(PurePosixPath(path).name))


def tasks_from_history(forge: GitHubForge, repo: str, limit: int,
                       note: Callable[[str], None] = lambda line: None) -> list[Task]:
    """Up to `limit` tasks from `repo`'s merged pull requests, most recently updated first; `note` hears
    why each passed-over pull request was."""
    forge.repository(repo)  # a repository the token cannot read is a ConfigError naming the fix
    tasks: list[Task] = []
    try:
        for pull in forge.merged_pulls(repo, scan=limit * SCAN_PER_TASK):
            try:
                tasks.append(task_of(forge, repo, pull))
            except _PassOver as e:
                note(f"#{pull.number}: passed over: {e}")
                continue
            if len(tasks) >= limit:
                break
    except GithubException as e:
        said = e.data.get("message", "") if isinstance(e.data, dict) else ""
        raise DecodeError(f"reading the pull requests of {repo}: GitHub answered {e.status} {said}".strip()) from None
    return tasks


class _PassOver(Exception):
    """A merged pull request that makes no task; the message says why."""


def task_of(forge: GitHubForge, repo: str, pull: MergedPull) -> Task:
    """The task `pull` makes, or `_PassOver`."""
    tests = [(path, status) for path, status, _ in pull.files if is_test_file(path)]
    renamed_from = [old for path, status, old in pull.files if old and is_test_file(path)]
    if not tests:
        raise _PassOver("it changed no test files")
    if len(tests) == len(pull.files):
        raise _PassOver("it changed only tests: there is no fix to make")
    written: dict[str, str] = {}
    for path, status in tests:
        if status == "removed":
            continue
        data = forge.file_at(repo, path, pull.merge_sha) or b""
        try:
            written[path] = data.decode("utf-8")
        except UnicodeDecodeError:
            raise _PassOver(f"the test file {path} is not text") from None
    if sum(len(text.encode()) for text in written.values()) > MAX_TEST_BYTES:
        raise _PassOver(f"its test files are over {MAX_TEST_BYTES // 1024} KB together")
    removed = [path for path, status in tests if status == "removed"] + renamed_from
    command = test_command(forge, repo, pull.base_sha, list(written))
    if command is None:
        raise _PassOver("no test command is known for this repository (no go.mod, Cargo.toml, package.json or "
                        "Python tests)")
    return Task(id=f"{repo}#{pull.number}", repo=repo, base=pull.base_sha, task=task_text(forge, repo, pull),
                check=check_command(written, removed, command))


def task_text(forge: GitHubForge, repo: str, pull: MergedPull) -> str:
    """The text of the issue `pull` closes, else the pull request's own title and body."""
    closes = _CLOSES.search(pull.body)
    if closes:
        try:
            issue = forge.issue(repo, int(closes.group(1)))
        except GithubException as e:
            if e.status not in (404, 410):  # a deleted or moved issue: the pull request's own text will do
                raise
        else:
            if not issue.is_pull:
                return f"{issue.title}\n\n{issue.body}".strip()
    return f"{pull.title}\n\n{pull.body}".strip()


def test_command(forge: GitHubForge, repo: str, base_sha: str, tests: list[str]) -> str | None:
    """The command that runs `tests` in `repo` as it was at `base_sha`; None when none is known."""
    try:
        verify = config_of(forge.file_at(repo, CONFIG_PATH, base_sha), f" at {base_sha[:12]}").verify
    except ConfigError:
        verify = ()  # a decode.yml the run would refuse: its `verify` says nothing reliable
    if verify:
        return " && ".join(f"( {command} )" for command in verify)
    for marker, command in _COMMANDS:
        if forge.file_at(repo, marker, base_sha) is not None:
            return command
    python = [path for path in tests if path.endswith(".py")]
    if python:
        return "python3 -m pytest -q " + " ".join(shlex.quote(path) for path in python)
    return None


def check_command(written: dict[str, str], removed: list[str], command: str) -> str:
    """A shell command that removes `removed`, writes each file of `written` and then runs `command`."""
    end = "DECODE_EVAL_" + secrets.token_hex(6).upper()
    lines = ["set -e"]
    lines += [f"rm -f -- {shlex.quote(path)}" for path in removed]
    for path, text in written.items():
        parent = str(PurePosixPath(path).parent)
        if parent != ".":
            lines.append(f"mkdir -p -- {shlex.quote(parent)}")
        body = text if text.endswith("\n") or not text else text + "\n"
        lines.append(f"cat > {shlex.quote(path)} <<'{end}'\n{body}{end}")
    lines.append(command)
    return "\n".join(lines)
