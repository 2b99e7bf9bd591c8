"""Runs ready to publish, without a sandbox or a model: bare repositories standing in for GitHub's, a
real `Workspace` cloned from one with the agent's commit on the run branch, a transcript written by the
real recorder, and the `Ran` the pipeline hands the GitHub job's publishing step."""

from __future__ import annotations

import subprocess
from pathlib import Path

from bot.agent.loop import AgentResult
from bot.github.info import PullInfo
from bot.run.pipeline import Job, Ran
from bot.run.result import Figures, RunResult, state_of
from bot.run.verify import Verification
from bot.core.redact import Redactor
from bot.run.transcript import Transcript
from bot.workspace.clone import prepare
from tests.conftest import GIT_ENV, git, make_repo
from tests.support.forge import WEB

FILES = {"README.md": "# calendar\n", "calendar.py": "def is_weekend(day):\n    return day >= 6\n"}
CHANGE = {"calendar.py": "def is_weekend(day):\n    return day >= 5\n"}


def bare(path: Path, files: dict[str, str] = FILES, *, branches: dict[str, dict[str, str]] | None = None) -> Path:
    """A bare repository at `path`: `files` on main, and each of `branches` one commit of its files on top."""
    source = make_repo(path.with_name(path.name + "-src"), files)
    for branch, changes in (branches or {}).items():
        commit_on(source, branch, changes, start="main")
    git(path.parent, "clone", "-q", "--bare", str(source), str(path))
    return path


def commit_on(repo: Path, branch: str, files: dict[str, str], *, start: str) -> str:
    """Commit `files` in the work tree `repo` on a new `branch` from `start`; the commit."""
    git(repo, "checkout", "-q", "-b", branch, start)
    for name, text in files.items():
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", f"work on {branch}")
    return git(repo, "rev-parse", "HEAD")


def head(remote: Path, ref: str) -> str | None:
    """The commit `ref` names in `remote` (a branch as `refs/heads/...`), or None when there is none."""
    out = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], cwd=remote, env=GIT_ENV,
                         capture_output=True, text=True)
    return out.stdout.strip() or None


def holds(remote: Path, commit: str) -> bool:
    """Whether `remote` has the object `commit` at all, under any ref or none."""
    return subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=remote, env=GIT_ENV,
                          capture_output=True).returncode == 0


def finished(remote: Path, run_dir: Path, *, branch: str, base: str | None = None, title: str = "Weekend check",
             stop_reason: str = "completed", summary: str = "Fixed the weekend check.", error: str | None = None,
             change: dict[str, str] | None = CHANGE, redactor: Redactor | None = None) -> Ran:
    """The outcome of a run on `remote`, as `bot.run.pipeline.execute` leaves it: the workspace on `branch` from
    `base`, `change` committed there by the bot (None: nothing to commit), and the agent's result."""
    redactor = redactor or Redactor([])
    job = Job(repo=str(remote), task=title, branch=branch, run_id=run_dir.name, base=base, title=title,
              co_author="alice <alice@users.noreply.github.com>")
    ws = prepare(str(remote), run_dir, branch, base, redactor=redactor)
    result = AgentResult(stop_reason, summary, turns=1, seconds=2.0, error=error)
    transcript = Transcript(run_dir, redactor)
    transcript.record("run_start", task=job.task, repo=job.repo, branch=branch, base_sha=ws.base_sha)
    transcript.record("model_response", turn=1, content=[{"type": "text", "text": "Changing the check."}],
                      stop_reason="end_turn", usage={"input_tokens": 100, "output_tokens": 10})
    transcript.record("run_end", stop_reason=stop_reason, summary=summary, turns=1, error=error)
    transcript.close()
    transcript.write_markdown()
    for name, text in (change or {}).items():  # the clean clone has no working tree: stage the files alone
        (ws.clean / name).parent.mkdir(parents=True, exist_ok=True)
        (ws.clean / name).write_text(text)
    if change:
        ws.git("add", "--", *change, what="staging the change")
    commit = ws.commit(title, job.co_author)
    run = RunResult(run_id=job.run_id, state=state_of(stop_reason, commit), repo=job.repo, branch=branch,
                    commit=commit, changed=tuple(sorted(change or {})), stop_reason=stop_reason,
                    figures=Figures.of(result), error=error, exit_code=result.exit_code)
    return Ran(job, run, result, Verification(), run_dir, ws)


def fork_pull(base: Path, fork: Path, *, number: int = 7, branch: str = "weekend-fix",
              maintainer_can_modify: bool = True) -> PullInfo:
    """A fork at `fork` of the bare repository `base` with `branch` one commit ahead, opened as pull request
    `number`: `base` holds the fork's head only as `refs/pull/<number>/head`, as GitHub keeps it."""
    git(base.parent, "clone", "-q", "--bare", str(base), str(fork))
    work = base.with_name(base.name + "-src")
    sha = commit_on(work, branch, {"NOTES.md": "Saturdays count.\n"}, start="main")
    git(work, "push", "-q", str(fork), f"{branch}:refs/heads/{branch}")
    git(work, "push", "-q", str(base), f"{branch}:refs/pull/{number}/head")
    return PullInfo(number, "Weekend check", "Saturdays count.", branch, sha, "mona/calendar", "main",
                    f"{WEB}/octo/calendar/pull/{number}", head_clone_url=str(fork),
                    maintainer_can_modify=maintainer_can_modify)


def push_commit(remote: Path, branch: str, files: dict[str, str]) -> str:
    """Someone else's commit of `files` on top of `remote`'s `branch`, pushed there; the commit."""
    work = remote.with_name(f"{remote.name}-{branch}-push")
    git(remote.parent, "clone", "-q", "-b", branch, str(remote), str(work))
    for name, text in files.items():
        (work / name).write_text(text)
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "a commit pushed meanwhile")
    git(work, "push", "-q", "origin", branch)
    return git(work, "rev-parse", "HEAD")
