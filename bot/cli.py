"""The `decode` command line.

`decode run` is the headless run; progress goes to stderr, the results (branch,
commit, transcript paths) to stdout. Exit status: 0 when the agent finished,
3 when it stopped at a budget cap (the partial work is still handed back),
1 for an error, 2 for bad usage or configuration. Errors are one line.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from bot.config import Settings
from bot.errors import ConfigError, DecodeError
from bot.pipeline import Job, Outcome, execute, issue_branch


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="decode", description="A sandboxed coding agent that turns tasks into branches and pull requests.")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the agent on a repository, headless")
    run.add_argument("task", help="what the agent should do")
    run.add_argument("--repo", default=".", help="repository URL or local path (default: the current directory)")
    run.add_argument("--issue", type=int, help="the issue this run works on (names the branch)")
    run.add_argument("--base", help="branch to start from (default: the repository's default branch)")
    run.add_argument("--no-pr", action="store_true", help="leave a local branch and the transcript, open no pull request")
    run.add_argument("--max-turns", type=int, help="turn cap (DECODE_MAX_TURNS)")
    run.add_argument("--max-cost", type=float, help="cost cap in USD (DECODE_MAX_COST_USD)")
    run.add_argument("--timeout-minutes", type=float, help="wall-clock cap (DECODE_TIMEOUT_MINUTES)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = Settings.from_env()
        return cmd_run(args, settings)
    except ConfigError as e:
        print(f"decode: {e}", file=sys.stderr)
        return 2
    except DecodeError as e:
        print(f"decode: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("decode: interrupted", file=sys.stderr)
        return 130


def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    budget = settings.budget
    changes = {k: v for k, v in {
        "max_turns": args.max_turns,
        "max_cost_usd": args.max_cost,
        "max_wall_s": args.timeout_minutes * 60 if args.timeout_minutes else None,
    }.items() if v is not None}
    for name, value in changes.items():
        if value <= 0:
            raise ConfigError(f"--{name.replace('_', '-')} must be positive")
    if changes:
        settings = settings.replace(budget=budget.__class__(**{**vars(budget), **changes}))
    repo = args.repo
    local = Path(repo).expanduser()
    if local.exists():
        repo = str(local.resolve())
    run_id = Job.new_run_id()
    branch = issue_branch(args.issue, args.task) if args.issue else f"decode/run-{run_id}"
    job = Job(repo=repo, task=args.task, branch=branch, run_id=run_id, base=args.base)
    outcome = execute(job, settings, progress=lambda line: print(line, file=sys.stderr, flush=True))
    report(outcome, deliver_local(outcome) if local.exists() else None)
    return 0 if outcome.result.completed else 3


def deliver_local(outcome: Outcome) -> str | None:
    """Fetch the run branch into the user's local repository; returns where it went."""
    if outcome.commit is None or outcome.workspace is None:
        return None
    target = outcome.job.repo
    subprocess.run(
        ["git", "-c", "core.hooksPath=/dev/null", "push", "--force", "--quiet", target,
         f"{outcome.job.branch}:refs/heads/{outcome.job.branch}"],
        cwd=outcome.workspace.clean, check=True, capture_output=True, env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
    )
    return target


def report(outcome: Outcome, delivered_to: str | None) -> None:
    r = outcome.result
    print(f"result: {r.stop_reason}")
    print(f"branch: {outcome.job.branch}")
    if outcome.commit:
        print(f"commit: {outcome.commit}")
        print(f"changed: {', '.join(outcome.changed)}")
        where = delivered_to or (outcome.workspace.clean if outcome.workspace else "")
        print(f"repository: {where}")
    else:
        print("commit: none (the agent made no changes)")
    print(f"figures: {r.turns} turns, {r.usage.input_tokens:,} in / {r.usage.output_tokens:,} out / "
          f"{r.usage.cache_read_tokens:,} cache read / {r.usage.cache_creation_tokens:,} cache write tokens, "
          f"${r.cost_usd:.4f}, {r.wall_s:.1f}s")
    print(f"transcript: {outcome.transcript_md}")
    print(f"transcript (jsonl): {outcome.transcript_jsonl}")
    if not r.completed:
        print(f"decode: {r.summary.splitlines()[0]}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
