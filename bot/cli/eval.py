"""`decode eval`: a task file through the real pipeline and sandbox, or `--from-history` to write one.

Each task's progress goes to stderr prefixed with its id; the table, then the last lines (`resolved R of
V`, cost, time, where results.jsonl is) to stdout. Exit 0 when every task ran, 1 when one errored, 2 for
bad input (one line naming the fix), 130 when interrupted (Ctrl-C or SIGTERM: no further task starts, the
running ones lose their sandboxes, results.jsonl keeps the tasks that ended). The logic is in bot/eval/;
docs/eval.md is the user's guide.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from datetime import datetime, timezone
from pathlib import Path

from bot.cli.repo import github_clone_url, github_repo_name
from bot.cli.run import with_budget_flags
from bot.config import Settings
from bot.core.errors import ConfigError
from bot.eval.runner import Judge, Outcome, run_task
from bot.eval.swebench import is_instance_file, read_instances, write_outputs
from bot.eval.summary import Results, last_lines, table
from bot.eval.tasks import Task, read_tasks
from bot.run.repo_config import parse_attempts
from bot.sandbox import close_all
from bot.workspace.clone import git_url, url_problem

def cmd_eval(args: argparse.Namespace, settings: Settings) -> int:
    """`decode eval`: write a task file from history, or run one; the exit status."""
    if args.from_history is not None:
        return from_history(args, settings)
    refuse((args.tasks is None, "give a task file (decode eval TASKS.jsonl), or --from-history OWNER/NAME --write "
                                "FILE"),
           (args.write is not None, "--write goes with --from-history: to run a task file, give it alone"),
           (args.parallel < 1, f"--parallel {args.parallel} is not valid: give 1 or more tasks at once"))
    parse_attempts(args.attempts, "--attempts")
    settings = with_budget_flags(settings.replace(pool_size=0), args)
    instances = read_instances(Path(args.tasks), args.test_cmd) if is_instance_file(Path(args.tasks)) else None
    refuse((instances is None and args.test_cmd is not None, "--test-cmd goes with SWE-bench instances (a task "
                                                             "file's checks are their own test commands)"))
    tasks = [i.task() for i in instances] if instances is not None else read_tasks(Path(args.tasks))
    judges: dict[str, Judge] = {i.instance_id: i.judge for i in instances or []}
    out = Path(args.out or datetime.now(timezone.utc).strftime("decode-eval-%Y%m%d-%H%M%S"))
    try:
        results = Results(out)
    except OSError as e:
        raise ConfigError(f"--out {out}: cannot write results.jsonl there ({e.strerror}): give a directory") from None
    started = time.monotonic()
    try:
        outcomes = run_all(tasks, settings, out, results, args.parallel, judges, args.attempts)
    finally:
        results.close()
    report = [] if instances is None else [f"SWE-bench: {write_outputs(out, instances, outcomes, settings.model.name)}"]
    for line in table(outcomes) + last_lines(outcomes, time.monotonic() - started, results.path) + report:
        print(line)
    return 1 if any(o.status == "error" for o in outcomes) else 0


def refuse(*rules: tuple[bool, str]) -> None:
    """A ConfigError with the message of the first rule that is broken (its flag true)."""
    for broken, message in rules:
        if broken:
            raise ConfigError(message)


def run_all(tasks: list[Task], settings: Settings, out: Path, results: Results, parallel: int,
            judges: dict[str, Judge], attempts: int = 1) -> list[Outcome]:
    """Every task, `parallel` at a time on threads (each its own run id, sandbox and branch), in file order;
    a task in `judges` has its checks judged by it (SWE-bench's per-test rule)."""
    lock = threading.Lock()

    def one(task: Task) -> Outcome:
        def progress(line: str) -> None:
            with lock:
                print(f"[{task.id}] {line}", file=sys.stderr, flush=True)

        outcome = run_task(task, settings.run, lambda repo: resolve(repo, settings), out, progress, judges.get(task.id),
                           attempts)
        progress(f"{outcome.status} ({outcome.seconds:.1f}s)")
        results.add(outcome)
        return outcome

    pool = ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="eval")
    futures = [pool.submit(one, task) for task in tasks]
    try:
        return [future.result() for future in futures]
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: no task starts, the running ones lose their sandboxes
        for future in futures:
            future.cancel()
        while not all(future.done() for future in futures):
            close_all()  # again until they end: a task between two steps opens its next sandbox after the first
            wait(futures, timeout=0.5)
        raise
    finally:
        pool.shutdown(wait=True)


def resolve(repo: str, settings: Settings) -> tuple[str, str | None]:
    """A task's `repo` as the pipeline clones it, and the token to clone with (as `decode run --repo`)."""
    local = Path(repo).expanduser()
    if local.exists():
        return str(local.resolve()), None
    name = github_repo_name(repo, settings.github.api_url)
    if name is not None:
        return github_clone_url(name, settings)
    if git_url(repo):
        if problem := url_problem(repo):
            raise ConfigError(f"repo {repo}: {problem}")
        return repo, settings.github.token
    raise ConfigError(f"repo {repo}: no such path, and not owner/name or a git URL")


def from_history(args: argparse.Namespace, settings: Settings) -> int:
    """`decode eval --from-history REPO --write FILE`: the task file from REPO's merged pull requests."""
    from bot.eval.history import tasks_from_history
    from bot.github.auth import credentials_from
    from bot.github.forge import GitHubForge

    repo = github_repo_name(args.from_history, settings.github.api_url)
    refuse((args.write is None, "--from-history needs --write TASKS.jsonl: the file to write the tasks to"),
           (args.tasks is not None, "give either a task file to run or --from-history, not both"),
           (args.limit < 1, f"--limit {args.limit} is not valid: give 1 or more"),
           (repo is None, f"--from-history {args.from_history}: give a GitHub repository as OWNER/NAME"),
           (not (settings.github.token or settings.github.app_id),
            "--from-history reads GitHub's pull requests: set GITHUB_TOKEN"))
    assert repo is not None
    note = lambda line: print(f"decode: {line}", file=sys.stderr, flush=True)  # noqa: E731
    tasks = tasks_from_history(GitHubForge(credentials_from(settings.github)), repo, args.limit, note)
    target = Path(args.write)
    try:
        target.write_text("".join(task.to_line() + "\n" for task in tasks), encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"--write {target}: cannot write it ({e.strerror})") from None
    print(f"wrote {len(tasks)} task{'s' if len(tasks) != 1 else ''} from {repo}'s merged pull requests to {target}")
    return 0
