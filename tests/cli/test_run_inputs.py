"""What `decode run` makes of its inputs: repository paths, the task, the budget flags and the
settings behind them, walked through the real console script against the fake Messages API.

A refused input is exit status 2 with one line on stderr naming what to fix, before any
request reaches the model; an accepted one runs to the end (exit 0).
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import git, make_repo
from tests.support.cli import DECODE, EXAMPLE, printed

DONE = [[{"type": "text", "text": "Nothing to change."}]]
NOTE = [[{"type": "tool_use", "name": "bash", "input": {"command": "echo checked > NOTES.md"}}],
        [{"type": "text", "text": "Took a note."}]]
TASK = "Check the weekend rule"


@dataclass
class Case:
    """One input: `argv` after `decode run` ({repo} and {tmp} are filled in), `env`, the repository kind,
    the directory to run in, standard input; then the exit status and what stderr must say."""

    argv: list[str]
    code: int
    says: str = ""
    env: dict[str, str] = field(default_factory=dict)
    repo: str = "repo"  # repo, plain (no git), empty (no commits), dirty (uncommitted changes)
    cwd: str = "{tmp}"
    stdin: str | None = None


CASES = {
    # the repository
    "a subdirectory is its repository": Case(["--repo", "{repo}/pkg", TASK], 0),
    "run from a subdirectory": Case([TASK], 0, cwd="{repo}/pkg"),
    "a folder outside git": Case(["--repo", "{repo}", TASK], 2, "is not in a git repository", repo="plain"),
    "a repository without commits": Case(["--repo", "{repo}", TASK], 2, "has no commits yet", repo="empty"),
    "uncommitted changes are named": Case(["--repo", "{repo}", TASK], 0, "uncommitted changes", repo="dirty"),
    "a missing path": Case(["--repo", "{tmp}/nope", TASK], 2, "--repo {tmp}/nope: no such path"),
    "a relative missing path": Case(["--repo", "./nope", TASK], 2, "--repo ./nope: no such path"),
    "an unknown --base": Case(["--repo", "{repo}", "--base", "nope", TASK], 2, "--base nope: no branch, tag or"),
    "--base a branch": Case(["--repo", "{repo}", "--base", "main", TASK], 0),
    # the task
    "a blank task": Case(["--repo", "{repo}", " \n\t "], 2, "the task is blank"),
    "--task-file PATH": Case(["--repo", "{repo}", "--task-file", "{tmp}/task.md"], 0),
    "--task-file -": Case(["--repo", "{repo}", "--task-file", "-"], 0, stdin=TASK + "\n"),
    "--task-file blank": Case(["--repo", "{repo}", "--task-file", "-"], 2, "the task is blank", stdin="\n  \n"),
    "--task-file missing": Case(["--repo", "{repo}", "--task-file", "{tmp}/nope.md"], 2,
                                "--task-file {tmp}/nope.md: cannot read it"),
    "--task-file and TASK": Case(["--repo", "{repo}", "--task-file", "{tmp}/task.md", TASK], 2, "not both"),
    # budget flags name themselves as typed
    "--max-cost nan": Case(["--repo", "{repo}", "--max-cost", "nan", TASK], 2, "--max-cost nan is not valid"),
    "--max-cost inf": Case(["--repo", "{repo}", "--max-cost", "inf", TASK], 2, "--max-cost inf is not valid"),
    "--max-cost 0": Case(["--repo", "{repo}", "--max-cost", "0", TASK], 2, "--max-cost 0.0 is not valid"),
    "--max-cost -1": Case(["--repo", "{repo}", "--max-cost", "-1", TASK], 2, "--max-cost -1.0 is not valid"),
    "--max-turns 0": Case(["--repo", "{repo}", "--max-turns", "0", TASK], 2, "--max-turns 0 is not valid"),
    "--max-turns abc": Case(["--repo", "{repo}", "--max-turns", "abc", TASK], 2, "--max-turns: invalid int value"),
    "--timeout-minutes 0": Case(["--repo", "{repo}", "--timeout-minutes", "0", TASK], 2,
                                "--timeout-minutes 0.0 is not valid"),
    "--timeout-minutes nan": Case(["--repo", "{repo}", "--timeout-minutes", "nan", TASK], 2,
                                  "--timeout-minutes nan is not valid"),
    # and their settings
    "DECODE_MAX_COST_USD=nan": Case(["--repo", "{repo}", TASK], 2, "DECODE_MAX_COST_USD='nan' is not valid",
                                    env={"DECODE_MAX_COST_USD": "nan"}),
    "DECODE_MAX_COST_USD=inf": Case(["--repo", "{repo}", TASK], 2, "DECODE_MAX_COST_USD='inf' is not valid",
                                    env={"DECODE_MAX_COST_USD": "inf"}),
    "a key file that is no key": Case(["--repo", "{repo}", TASK], 2,
                                      "GITHUB_APP_PRIVATE_KEY_PATH={tmp}/task.md is not a PEM private key",
                                      env={"GITHUB_APP_PRIVATE_KEY_PATH": "{tmp}/task.md"}),
    "DECODE_TIMEOUT_MINUTES=inf": Case(["--repo", "{repo}", TASK], 2, "DECODE_TIMEOUT_MINUTES='inf' is not valid",
                                       env={"DECODE_TIMEOUT_MINUTES": "inf"}),
}


def make(kind: str, tmp_path: Path) -> Path:
    """A repository of `kind` (see Case.repo) under `tmp_path`."""
    files = {p.name: p.read_text() for p in (EXAMPLE / "repo").iterdir()}
    path = tmp_path / "calendar"
    if kind == "plain":
        path.mkdir()
        (path / "notes.txt").write_text("not a repository\n")
        return path
    if kind == "empty":
        path.mkdir()
        git(path, "init", "-q", "-b", "main")
        return path
    make_repo(path, {**files, "pkg/__init__.py": ""})
    if kind == "dirty":
        (path / "calendar_utils.py").write_text("# half-done edit\n")
    return path


def run_decode(argv: list[str], fake, tmp_path: Path, *, cwd: Path, stdin: str | None = None, **env: str):
    """The `decode` console script as a user runs it."""
    full_env = {
        "PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), "SANDBOX_MODE": "local",
        "ANTHROPIC_API_KEY": fake.api_key, "ANTHROPIC_BASE_URL": fake.url,
        "DECODE_DATA_DIR": str(tmp_path / "data"), "PYTHONPATH": str(EXAMPLE.parents[1]), **env,
    }
    return subprocess.run([DECODE, *argv], env=full_env, cwd=cwd, input=stdin, capture_output=True, text=True,
                          timeout=240)


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_decode_run_inputs(fake_anthropic, tmp_path, case: Case):
    fake_anthropic.script(NOTE)
    repo = make(case.repo, tmp_path)
    (tmp_path / "task.md").write_text(TASK + "\n")

    def fill(text: str) -> str:
        return text.replace("{repo}", str(repo)).replace("{tmp}", str(tmp_path))

    res = run_decode(["run", *map(fill, case.argv)], fake_anthropic, tmp_path, cwd=Path(fill(case.cwd)),
                     stdin=case.stdin, **{name: fill(value) for name, value in case.env.items()})
    assert "Traceback" not in res.stderr
    assert res.returncode == case.code, res.stderr
    if case.code == 2:
        [line] = res.stderr.strip().splitlines()
        assert line.startswith("decode") and fill(case.says) in line, line
        assert not fake_anthropic.requests  # refused before any work
        assert not list((tmp_path / "data").glob("runs/*"))  # and before a run directory
        return
    assert fill(case.says) in res.stderr
    assert TASK in str(fake_anthropic.requests[0].body)
    # the branch lands in the repository's top level, the user's checkout untouched
    assert printed(res.stdout, "repository") == str(repo)
    assert git(repo, "show", f"{printed(res.stdout, 'branch')}:NOTES.md") == "checked"
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"


def test_version_is_the_installed_distributions(tmp_path):
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(EXAMPLE.parents[1])}
    res = subprocess.run([DECODE, "--version"], env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"decode {importlib.metadata.version('decode-bot')}"


@pytest.mark.parametrize("argv", [["--version"], ["run", "--max-turns", "0", TASK], ["check", "--repo", "{tmp}"]],
                         ids=["--version", "a bad flag", "decode check"])
def test_answers_without_loading_the_model_sdk(tmp_path, argv):
    """The Anthropic SDK takes over a second to import: --version, an input error and `decode check`
    answer without it (`-X importtime` lists every module the console script imported)."""
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(EXAMPLE.parents[1]), "HOME": str(tmp_path),
           "DECODE_DATA_DIR": str(tmp_path / "data"), "SANDBOX_MODE": "local", "ANTHROPIC_API_KEY": "sk-ant-x"}
    make("repo", tmp_path)
    argv = [a.replace("{tmp}", str(tmp_path / "calendar")) for a in argv]
    res = subprocess.run([sys.executable, "-X", "importtime", DECODE, *argv], env=env, capture_output=True, text=True,
                         timeout=60)
    imported = {line.rsplit("|", 1)[-1].strip() for line in res.stderr.splitlines() if line.startswith("import time:")}
    assert "bot.cli" in imported and "bot.config" in imported, res.stderr[-2000:]  # the listing works
    assert not {name for name in imported if name.split(".")[0] == "anthropic"}
    assert res.returncode == (2 if argv[0] == "run" else 0), res.stderr[-2000:]


def test_no_pr_with_a_github_repository_keeps_a_local_branch(fake_anthropic, fake_github, tmp_path):
    fake_github.add_repo("octo", "calendar", {p.name: p.read_text() for p in (EXAMPLE / "repo").iterdir()})
    fake_anthropic.script(NOTE)
    res = run_decode(["run", "--repo", "octo/calendar", "--no-pr", TASK], fake_anthropic, tmp_path, cwd=tmp_path,
                     GITHUB_TOKEN=fake_github.token, GITHUB_API_URL=fake_github.api_url)
    assert res.returncode == 0, res.stderr
    branch = printed(res.stdout, "branch")
    clone = Path(printed(res.stdout, "repository"))
    assert clone.is_relative_to(tmp_path / "data")
    assert git(clone, "show", f"{branch}:NOTES.md") == "checked"
    assert Path(printed(res.stdout, "transcript")).is_file()
    assert not fake_github.pulls("octo", "calendar")  # no pull request
    assert fake_github.token not in res.stdout + res.stderr


@pytest.mark.parametrize("argv, says", [
    (["--help"], ["ANTHROPIC_API_KEY", "SANDBOX_MODE", "docs/settings.md", "exit status: 0 done",
                  "3 stopped by a budget"]),
    (["run", "--help"], ["DECODE_MAX_TURNS", "GITHUB_TOKEN", "docs/decode-yml.md", "2 a bad setting or input"]),
    (["serve", "--help"], ["GITHUB_WEBHOOK_SECRET", "DECODE_DATABASE_URL", "setup mode", "neither App credentials nor "
                           "GITHUB_TOKEN", "/webhook answers 503", "exit status"]),
    (["check", "--help"], ["decode.yml", "exit status: 0 valid, 2"]),
], ids=["decode", "run", "serve", "check"])
def test_help_names_the_settings_and_exit_statuses(argv, says):
    res = subprocess.run([DECODE, *argv], env={"PATH": os.environ["PATH"], "PYTHONPATH": str(EXAMPLE.parents[1])},
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    text = " ".join(res.stdout.split())
    assert [s for s in says if s not in text] == []


@pytest.mark.parametrize("form, no_pr", [("owner/name", False), ("owner/name", True), ("url", False), ("url", True)])
def test_an_unknown_base_of_a_github_repository_is_bad_input(fake_anthropic, fake_github, tmp_path, form, no_pr):
    fake_github.add_repo("octo", "calendar", {p.name: p.read_text() for p in (EXAMPLE / "repo").iterdir()})
    fake_anthropic.script(NOTE)
    repo = "octo/calendar" if form == "owner/name" else f"{fake_github.web_url}/octo/calendar"
    res = run_decode(["run", "--repo", repo, "--base", "nope", *(["--no-pr"] if no_pr else []), TASK],
                     fake_anthropic, tmp_path, cwd=tmp_path, GITHUB_TOKEN=fake_github.token,
                     GITHUB_API_URL=fake_github.api_url)
    assert res.returncode == 2, res.stderr[-2000:]
    assert "Traceback" not in res.stderr
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("decode: base 'nope' is neither a branch, a tag nor a commit of ") and \
        last.endswith("(or the repository is empty): give one of its branches, tags or commits"), last
    assert not fake_anthropic.requests and not fake_github.pulls("octo", "calendar")
    assert fake_github.token not in res.stdout + res.stderr
