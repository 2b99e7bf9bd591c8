"""`decode run`: one task, headless, on a local path or a GitHub repository.

Progress goes to stderr, the results (branch, commit, transcript paths) to stdout. A GitHub repository
with a token runs the same job as a webhook's and ends in a pull request (`run_on_github`); a local
path, or `--no-pr`, runs the pipeline alone and leaves a local branch (`deliver_local`) and the
transcript files, whose paths `report` prints.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from bot.cli.plan import issue_task, run_plan
from bot.cli.repo import github_clone_url, github_repo_name, local_repository
from bot.config import RunParts, Settings
from bot.core.errors import ConfigError, DecodeError
from bot.core.names import CLI_ORIGIN, run_branch, run_tag
from bot.model import preload
from bot.run.attempts import pick, run_attempts, stand_in, table as attempts_table, why
from bot.run.pipeline import Job, Ran, execute
from bot.run.repo_config import PATH as CONFIG_PATH, config_of, parse_attempts
from bot.workspace.clone import git_url, url_problem
from bot.workspace.run_dirs import drop_clones


def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    """`decode run`: the budget flags over the settings, then the run on GitHub or locally; the exit status.
    A real model's SDK starts loading once the flags and the task are read (an error in them is answered
    without it), beside the repository's resolution and the clone."""
    settings = settings.replace(pool_size=0)  # one run per process: a warm pool would only start containers
    settings = with_budget_flags(settings, args)
    if args.attempts is not None:
        parse_attempts(args.attempts, "--attempts")
    progress = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    args.task = task_text(args)
    if args.issue is None and args.task is None:
        raise ConfigError("give a TASK (or --task-file PATH), or --issue N to work on an issue")
    if args.issue is not None and args.issue < 1:  # else a reaction was posted to GitHub's 404 first
        raise ConfigError(f"--issue {args.issue} is not valid: give the number of an issue or pull request")
    preload(settings.model)
    local = Path(args.repo).expanduser()
    github_repo = None if local.exists() else github_repo_name(args.repo, settings.github.api_url)
    if not local.exists() and github_repo is None:
        if not git_url(args.repo):
            raise ConfigError(f"--repo {args.repo}: no such path, and not owner/name or a git URL: give a local "
                              "repository's path, owner/name or a git URL")
        if problem := url_problem(args.repo):
            raise ConfigError(f"--repo {args.repo}: {problem}")
    run_id = Job.new_run_id()
    if github_repo and not args.no_pr and not args.plan:
        return run_on_github(args, settings, github_repo, run_id, progress)
    if args.issue is not None and args.plan and github_repo:
        args.task = issue_task(settings, github_repo, args.issue, args.task or "")
        args.issue = None
    if args.issue is not None:
        raise ConfigError("--issue needs a GitHub repository (owner/name or its URL) and GITHUB_TOKEN, without --no-pr")
    token = settings.github.token  # for a git URL that needs it
    if local.exists():
        repo, token = local_repository(local, args.base), None
    elif github_repo:
        repo, token = github_clone_url(github_repo, settings)
    else:
        repo = args.repo
    if args.plan:
        return run_plan(args, settings, repo, token, args.task, run_id, progress)
    job = Job(repo=repo, task=args.task, branch=run_branch(run_tag(CLI_ORIGIN, run_id)), run_id=run_id, base=args.base,
              token=token)
    count = args.attempts or (attempts_at(repo, args.base) if local.exists() else 1)
    ran = best_of(job, settings.run, count, progress) if count > 1 else \
        execute(job, settings.run, progress=progress)
    if ran is None:
        return 1
    delivered = deliver_local(ran) if local.exists() else None
    if delivered:  # the branch is in the user's repository: the run's clone is not needed any more
        drop_clones(ran.run_dir)
    report(ran, delivered)
    return ran.result.exit_code


def attempts_at(repo: str, base: str | None) -> int:
    """decode.yml's `attempts` at `base` (default: HEAD) of the local repository `repo`."""
    shown = subprocess.run(["git", "-C", repo, "show", f"{base or 'HEAD'}:{CONFIG_PATH}"], capture_output=True)
    return config_of(shown.stdout if shown.returncode == 0 else None).attempts


def best_of(job: Job, parts: RunParts, count: int, progress: Callable[[str], None]) -> Ran | None:
    """`count` attempts of `job` at once (bot/run/attempts.py): each one's line, how the published one was
    picked, and the `Ran` to deliver: the picked one, or with none picked the stand-in a single run would have
    been (`stand_in`, said on stderr); None when no attempt finished."""
    chosen, attempts, rans = run_attempts(job, count, progress, parts=parts)
    for line in attempts_table(attempts, pick(attempts)):
        print(line)
    print(f"picked: {why(attempts, pick(attempts))}")
    delivered = stand_in(chosen, attempts, rans)
    if chosen is None and delivered is not None:
        print(f"decode: {why(attempts, None)}: delivering attempt {rans.index(delivered) + 1} as it ended",
              file=sys.stderr)
    elif delivered is None:
        print(f"decode: {why(attempts, None)}", file=sys.stderr)
    return delivered


def with_budget_flags(settings: Settings, args: argparse.Namespace) -> Settings:
    """`settings` with the budget flags given in `args` (--max-turns, --max-cost, --timeout-minutes) over
    their variables; a flag that is not a positive number is a ConfigError."""
    budget = settings.budget
    caps = {  # budget field: (the flag as typed, its value, the factor to the field's unit)
        "max_turns": ("--max-turns", getattr(args, "max_turns", None), 1),
        "max_cost_usd": ("--max-cost", getattr(args, "max_cost", None), 1),
        "max_wall_s": ("--timeout-minutes", getattr(args, "timeout_minutes", None), 60),
    }
    changes = {}
    for name, (flag, value, factor) in caps.items():
        if value is None:
            continue
        if not math.isfinite(value) or value <= 0:
            raise ConfigError(f"{flag} {value} is not valid: give a positive number")
        changes[name] = value * factor
    return settings.replace(budget=budget.__class__(**{**vars(budget), **changes})) if changes else settings


def task_text(args: argparse.Namespace) -> str | None:
    """The task from TASK or --task-file (`-`: standard input); None when neither is given; blank is refused."""
    task = args.task
    if args.task_file is not None:
        if task is not None:
            raise ConfigError("give the task either as TASK or with --task-file, not both")
        try:
            task = sys.stdin.read() if args.task_file == "-" else Path(args.task_file).read_text(encoding="utf-8")
        except OSError as e:
            raise ConfigError(f"--task-file {args.task_file}: cannot read it ({e.strerror})") from None
        except UnicodeDecodeError:
            raise ConfigError(f"--task-file {args.task_file}: not UTF-8 text") from None
    if task is not None and not task.strip():
        raise ConfigError("the task is blank: say what the agent should do")
    return task


def run_on_github(args: argparse.Namespace, settings: Settings, repo: str, run_id: str,
                  progress: Callable[[str], None]) -> int:
    """Token (or App) mode: the same job as a webhook's, without the permission check, ending in a PR."""
    from bot.github.auth import credentials_from
    from bot.github.forge import GitHubForge
    from bot.github.job import JobContext, run_github_job
    from bot.github.work import Dispatch, Issue

    forge = GitHubForge(credentials_from(settings.github))
    if args.issue is not None:
        work: Issue | Dispatch = Issue(repo=repo, number=args.issue, sender_login="", instructions=args.task or "")
    else:
        work = Dispatch(repo=repo, sender_login="", sender_type="User", instructions=args.task, base_ref=args.base)
    conclusion = run_github_job(JobContext(work, forge, run_id, run_tag(CLI_ORIGIN, run_id),
                                           authorize=False, progress=progress, attempts=args.attempts), settings.job)
    result = conclusion.recorded(run_id)  # the pull request and the commit GitHub has, for `decode runs`
    if conclusion.ran is not None:
        report(conclusion.ran, None)
    if result.pr_url:
        print(f"pull request: {result.pr_url}")
    if result.state == "failed":  # one line; the tracking comment and the PR hold the rest
        error = ConfigError if result.exit_code == 2 else DecodeError
        raise error((conclusion.message or "failed").splitlines()[0].removeprefix("❌ "))
    if result.state == "skipped":
        print(f"decode: did not run: {conclusion.message.splitlines()[0]}", file=sys.stderr)
        return 1
    return result.exit_code


def deliver_local(ran: Ran) -> str | None:
    """Fetch the run branch into the user's local repository; returns where it went."""
    if ran.result.commit is None or ran.workspace is None:
        return None
    target = ran.job.repo
    subprocess.run(
        ["git", "-c", "core.hooksPath=/dev/null", "push", "--force", "--quiet", target,
         f"{ran.job.branch}:refs/heads/{ran.job.branch}"],
        cwd=ran.workspace.clean, check=True, capture_output=True, env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
    )
    return target


def report(ran: Ran, delivered_to: str | None) -> None:
    """The last lines of `decode run`: the run's result (bot/run/result.py), its verification and transcript."""
    result, figures = ran.result, ran.result.figures
    print(f"result: {result.stop_reason}")
    print(f"branch: {ran.job.branch}")
    clone = ran.workspace.clean if ran.workspace is not None and ran.workspace.clean.is_dir() else None
    where = delivered_to or clone  # None: the commit is only on GitHub (the clone was dropped after publishing)
    if result.commit:
        print(f"commit: {result.commit}")
        print(f"changed: {', '.join(result.changed)}")
        if where:
            print(f"repository: {where}")
    else:
        lost = result.stop_reason == "sandbox_lost"
        print(f"commit: none ({'no sandbox could hand the work back' if lost else 'the agent made no changes'})")
    if result.restarts:
        print(f"sandbox: restarted {len(result.restarts)}x, after: {'; '.join(result.restarts)}")
    if figures is not None:
        u = figures.usage
        print(f"figures: {figures.turns} turns, {u.input_tokens:,} in / {u.output_tokens:,} out / "
              f"{u.cache_read_tokens:,} cache read / {u.cache_creation_tokens:,} cache write tokens, "
              f"${figures.cost_usd:.4f}, {figures.seconds:.1f}s, {figures.trims} context trims")
    print(ran.verification.line())
    print(f"transcript: {ran.transcript_md}")
    print(f"transcript (jsonl): {ran.transcript_jsonl}")
    if result.stop_reason == "interrupted":
        kept = f"the work so far is commit {result.commit[:12]} on branch {ran.job.branch}" + \
            (f" in {where}" if where else "") if result.commit else "the agent had made no changes"
        print(f"decode: interrupted: {kept}; the transcript is {ran.transcript_md}", file=sys.stderr)
    elif result.stop_reason != "completed":
        print(f"decode: {ran.agent.summary.splitlines()[0]}", file=sys.stderr)
