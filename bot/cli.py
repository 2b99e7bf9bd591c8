"""The `decode` command line.

`decode run` is the headless run; progress goes to stderr, the results (branch,
commit, transcript paths) to stdout. Exit status: 0 when the agent finished,
3 when it stopped at a budget cap (the partial work is still handed back),
1 for an error, 2 for bad usage or configuration, 130 when interrupted (Ctrl-C or
SIGTERM: the work so far is committed on the run branch, the sandbox removed and
the transcript written; the last lines say where). Errors are one line.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path

from bot.config import Settings
from bot.core.errors import ConfigError, DecodeError, Interrupted
from bot.core.names import run_branch
from bot.run.pipeline import Job, Ran, execute
from bot.workspace.run_dirs import drop_clones


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line like every other error."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def version() -> str:
    """The installed distribution's version."""
    try:
        return importlib.metadata.version("decode-bot")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


EXIT_STATUS = """exit status: 0 done or nothing to change, 1 failed, 2 a bad setting or input (one line
naming the fix), 3 stopped by a budget cap (partial work committed), 130 interrupted."""

SETTINGS = """settings (environment; every one in docs/settings.md): ANTHROPIC_API_KEY,
ANTHROPIC_BASE_URL, DECODE_MODEL (scripted:FILE replays a session), SANDBOX_MODE
(local, bwrap, docker, modal), DECODE_SANDBOX_IMAGE, GITHUB_TOKEN or GITHUB_APP_ID
with GITHUB_APP_PRIVATE_KEY[_PATH], GITHUB_API_URL, DECODE_DATA_DIR, budgets
DECODE_MAX_TURNS, DECODE_MAX_TOKENS, DECODE_MAX_COST_USD, DECODE_TIMEOUT_MINUTES."""

RUN_HELP = """reads: ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, DECODE_MODEL, SANDBOX_MODE,
DECODE_SANDBOX_IMAGE, DECODE_DATA_DIR, GITHUB_TOKEN (a GitHub repository: branch and
pull request), GITHUB_API_URL, the budgets DECODE_MAX_TURNS, DECODE_MAX_TOKENS,
DECODE_MAX_COST_USD, DECODE_TIMEOUT_MINUTES (the flags override them), DECODE_MAX_DISK_MB,
DECODE_KEEP_DAYS; the repository's .github/decode.yml (docs/decode-yml.md).

""" + EXIT_STATUS

SERVE_HELP = """reads: GITHUB_APP_ID with GITHUB_APP_PRIVATE_KEY or GITHUB_APP_PRIVATE_KEY_PATH (or
GITHUB_TOKEN), GITHUB_WEBHOOK_SECRET, ANTHROPIC_API_KEY, DECODE_MODEL, SANDBOX_MODE,
DECODE_SANDBOX_IMAGE, DECODE_POOL_SIZE, DECODE_DATA_DIR, DECODE_DATABASE_URL (default: SQLite
in the data dir), DECODE_WORKERS, DECODE_LEASE_SECONDS, DECODE_MAX_ATTEMPTS,
DECODE_SHUTDOWN_GRACE_SECONDS, DECODE_PUBLIC_URL (links to live transcript pages),
GITHUB_CLIENT_ID and GITHUB_CLIENT_SECRET (dashboard sign-in), DECODE_METRICS_TOKEN,
DECODE_TRIGGER_LABEL, DECODE_COMMAND, GITHUB_API_URL.

setup mode: with neither App credentials nor GITHUB_TOKEN (nor an App that /setup stored in
the data dir), the server starts in setup mode: /webhook answers 503 and the log names the
/setup URL that creates the GitHub App in one click (docs/setup.md).

exit status: 0 stopped, 1 GitHub unreachable, 2 a bad setting (one line naming the fix) or a
port in use."""

CHECK_HELP = """Validates the settings and the repository's .github/decode.yml (as committed on the
branch a run starts from) and says what a run would do there: model, sandbox and image,
setup commands, network, verify, setup cache, budget. Nothing is started or sent.
exit status: 0 valid, 2 a setting or decode.yml to fix (one line naming it)."""


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="decode", description="A sandboxed coding agent that turns tasks into branches and pull "
                     "requests.", epilog=f"{SETTINGS}\n\n{EXIT_STATUS}", formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the agent on a repository, headless", epilog=RUN_HELP,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("task", nargs="?", help="what the agent should do (with --issue: extra instructions)")
    run.add_argument("--task-file", metavar="PATH", help="read the task from PATH (- for standard input)")
    run.add_argument("--repo", default=".", help="owner/name, a repository URL, or a local path (default: .)")
    run.add_argument("--issue", type=int, help="work on this GitHub issue (or pull request) and open a PR")
    run.add_argument("--base", help="branch to start from (default: the repository's default branch)")
    run.add_argument("--no-pr", action="store_true", help="leave a local branch and the transcript, open no pull request")
    run.add_argument("--max-turns", type=int, help="turn cap (DECODE_MAX_TURNS)")
    run.add_argument("--max-cost", type=float, help="cost cap in USD (DECODE_MAX_COST_USD)")
    run.add_argument("--timeout-minutes", type=float, help="wall-clock cap (DECODE_TIMEOUT_MINUTES)")
    serve = sub.add_parser("serve", help="the GitHub App webhook server with an embedded worker pool",
                           epilog=SERVE_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8080, help="port to listen on (default 8080)")
    serve.add_argument("--workers", type=int, help="worker threads (DECODE_WORKERS, default 4; 0: intake only)")
    sub.add_parser("action", help="the GitHub Actions entry point (reads the GITHUB_* variables)")
    worker = sub.add_parser("worker", help="run queued jobs only, against the server's store")
    worker.add_argument("--workers", type=int, help="worker threads (DECODE_WORKERS, default 4)")
    worker.add_argument("--host", default="127.0.0.1", help="address of --port (default 127.0.0.1)")
    worker.add_argument("--port", type=int, help="serve GET /metrics on this port (default: none)")
    check = sub.add_parser("check", help="validate the settings and .github/decode.yml; say what a run would do",
                           description=CHECK_HELP)
    check.add_argument("--repo", default=".", help="a local path or owner/name on GitHub (default: .)")
    cache = sub.add_parser("cache", help="the setup cache (docker, bwrap, modal): list or clear its entries")
    cache_sub = cache.add_subparsers(dest="cache_command", required=True)
    cache_sub.add_parser("list", help="one line per entry: key, repository, age, size, last used")
    clear = cache_sub.add_parser("clear", help="remove one entry (KEY or a prefix of it) or --all")
    clear.add_argument("key", nargs="?", help="the entry's key, or its first characters as `decode cache list` shows")
    clear.add_argument("--all", action="store_true", help="remove every entry")
    runs = sub.add_parser("runs", help="the runs DECODE_DATA_DIR holds, newest first (bot/run/history.py)")
    runs.add_argument("--limit", type=int, default=20, help="show at most N runs (default 20)")
    return parser


INTERRUPTED = 130


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command in ("run", "action"):
        with sigterm_interrupts():
            return _main(args)
    return _main(args)


def _main(args: argparse.Namespace) -> int:
    try:
        if args.command == "action":
            from bot.action import run_action

            return run_action()
        settings = Settings.from_env()
        if args.command in ("serve", "worker"):
            from bot.github.app_credentials import with_stored_app
            from bot.server import run as server

            settings = with_stored_app(settings)  # the App /setup created, unless the environment sets one

            if args.workers is not None:
                if args.workers < 0:
                    raise ConfigError("--workers must be 0 (decode serve: intake only) or more")
                settings = settings.replace(workers=args.workers)
            if args.command == "serve":
                return server.serve(settings, args.host, args.port)
            return server.work(settings, args.host, args.port)
        if args.command == "cache":
            return cmd_cache(args, settings)
        if args.command == "check":
            return cmd_check(args, settings)
        if args.command == "runs":
            from bot.run.history import cmd_runs

            return cmd_runs(args, settings.store.data_dir)
        return cmd_run(args, settings)
    except ConfigError as e:
        print(f"decode: {e}", file=sys.stderr)
        return 2
    except Interrupted as e:
        print(f"decode: {e}", file=sys.stderr)
        return INTERRUPTED
    except DecodeError as e:
        print(f"decode: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("decode: interrupted", file=sys.stderr)
        return INTERRUPTED


class sigterm_interrupts:
    """While active, SIGTERM interrupts like Ctrl-C, so a stopped run (a cancelled workflow, `kill`, a
    container stop) keeps its work, removes its sandbox and writes its transcript instead of dying."""

    def __enter__(self) -> None:
        self._previous = None
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, _interrupt)

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def cmd_cache(args: argparse.Namespace, settings: Settings) -> int:
    """`decode cache list|clear`: the setup cache's entries in DECODE_DATA_DIR/setup-cache (bot/run/setup_cache.py)."""
    from bot.run.setup_cache import SetupCache

    cache = SetupCache(settings.store.data_dir / "setup-cache")
    entries = cache.entries()
    if args.cache_command == "list":
        now = time.time()
        for e in entries:
            print(f"{e.key[:12]}  {e.repo}  {_age(now - e.created)} old  {e.size / 1024 / 1024:.1f} MB  "
                  f"used {_age(now - e.last_used)} ago")
        if not entries:
            print(f"the setup cache in {cache.directory} is empty", file=sys.stderr)
        return 0
    if args.all == bool(args.key):
        raise ConfigError("decode cache clear takes either a KEY (as `decode cache list` shows it) or --all")
    chosen = entries if args.all else [e for e in entries if e.key.startswith(args.key)]
    if not args.all and len(chosen) != 1:
        raise ConfigError(f"no setup cache entry has the key {args.key!r}: see `decode cache list`" if not chosen
                          else f"{args.key!r} starts {len(chosen)} keys: give more of it")
    busy = [e.key[:12] for e in chosen if not cache.remove(e)]
    print(f"removed {len(chosen) - len(busy)} setup cache entries", file=sys.stderr)
    if busy:
        raise DecodeError(f"kept {', '.join(busy)}: a sandbox is running from it; clear again after that run")
    return 0


def cmd_check(args: argparse.Namespace, settings: Settings) -> int:
    """`decode check`: the settings and the repository's decode.yml, and what a run would do (bot/run/check.py)."""
    from bot.run import check

    local = Path(args.repo).expanduser()
    if local.exists():
        return check.check(settings, check.local_config(local_repository(local)))
    github_repo = github_repo_name(args.repo, settings.github.api_url)
    if github_repo is None:
        raise ConfigError(f"--repo {args.repo}: no such path, and not owner/name or a GitHub URL")
    return check.check(settings, check.github_config(github_repo, settings))


def _age(seconds: float) -> str:
    """`seconds` as the largest whole unit: 45s, 12m, 3h, 2d."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(max(seconds, 0))}s"


def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    settings = settings.replace(pool_size=0)  # one run per process: a warm pool would only start containers
    budget = settings.budget
    caps = {  # budget field: (the flag as typed, its value, the factor to the field's unit)
        "max_turns": ("--max-turns", args.max_turns, 1),
        "max_cost_usd": ("--max-cost", args.max_cost, 1),
        "max_wall_s": ("--timeout-minutes", args.timeout_minutes, 60),
    }
    changes = {}
    for name, (flag, value, factor) in caps.items():
        if value is None:
            continue
        if not math.isfinite(value) or value <= 0:
            raise ConfigError(f"{flag} {value} is not valid: give a positive number")
        changes[name] = value * factor
    if changes:
        settings = settings.replace(budget=budget.__class__(**{**vars(budget), **changes}))
    progress = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    args.task = task_text(args)
    if args.issue is None and args.task is None:
        raise ConfigError("give a TASK (or --task-file PATH), or --issue N to work on an issue")
    local = Path(args.repo).expanduser()
    github_repo = None if local.exists() else github_repo_name(args.repo, settings.github.api_url)
    run_id = Job.new_run_id()
    if github_repo and not args.no_pr:
        return run_on_github(args, settings, github_repo, run_id, progress)
    if args.issue is not None:
        raise ConfigError("--issue needs a GitHub repository (owner/name or its URL) and GITHUB_TOKEN, without --no-pr")
    token = settings.github.token  # for a git URL that needs it
    if local.exists():
        repo, token = local_repository(local), None
    elif github_repo:
        repo, token = github_clone_url(github_repo, settings)
    else:
        repo = args.repo
    job = Job(repo=repo, task=args.task, branch=run_branch(run_id), run_id=run_id, base=args.base, token=token)
    ran = execute(job, settings, progress=progress)
    delivered = deliver_local(ran) if local.exists() else None
    if delivered:  # the branch is in the user's repository: the run's clone is not needed any more
        drop_clones(ran.run_dir)
    report(ran, delivered)
    return ran.result.exit_code


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


def local_repository(path: Path) -> str:
    """The top level of the git repository holding `path` (a subdirectory is fine), warning about uncommitted changes.

    A folder outside any repository, or a repository without commits, is a ConfigError.
    """
    env = {k: v for k, v in os.environ.items() if k not in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE",
                                                            "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY")}

    def git(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", "-C", str(path), *argv], capture_output=True, text=True, env=env)

    bare = git("rev-parse", "--is-bare-repository")
    if bare.returncode != 0 or not path.is_dir():
        raise ConfigError(f"{path} is not in a git repository: give a repository's path, owner/name or a git URL")
    is_bare = bare.stdout.strip() == "true"
    top = git("rev-parse", "--absolute-git-dir" if is_bare else "--show-toplevel").stdout.strip()
    if not git("rev-list", "-n", "1", "--all").stdout.strip():
        raise ConfigError(f"the repository {top} has no commits yet: commit something for the agent to start from")
    if not is_bare and git("status", "--porcelain").stdout.strip():
        print(f"decode: warning: uncommitted changes in {top} are not part of the run (it starts from committed "
              "history): commit them first to include them", file=sys.stderr, flush=True)
    return top


def github_clone_url(repo: str, settings: Settings) -> tuple[str, str | None]:
    """Where to clone GitHub's `repo` from, and the token to clone with (None: anonymous, public repositories)."""
    if settings.github.token or settings.github.app_id:
        from bot.github.auth import credentials_from
        from bot.github.forge import GitHubForge

        forge = GitHubForge(credentials_from(settings))
        return forge.repository(repo).clone_url, forge.token_for(repo)
    api = urllib.parse.urlsplit(settings.github.api_url)
    if api.hostname == "api.github.com":
        return f"https://github.com/{repo}.git", None
    return f"{api.scheme}://{api.netloc}{api.path.removesuffix('/api/v3')}/{repo}.git", None  # GitHub Enterprise


def github_repo_name(repo: str, api_url: str = "https://api.github.com") -> str | None:
    """"owner/name" for `owner/name` or a URL on GitHub (or the GITHUB_API_URL host), else None."""
    if re.fullmatch(r"[A-Za-z0-9][\w-]*/[\w.-]+", repo):
        return repo.removesuffix(".git")
    parts = urllib.parse.urlsplit(repo)
    api_host = urllib.parse.urlsplit(api_url).hostname or ""
    if parts.scheme not in ("http", "https") or parts.hostname not in {"github.com", api_host,
                                                                        api_host.removeprefix("api.")}:
        return None
    match = re.fullmatch(r"/(?:.*/)?([\w.-]+)/([\w.-]+?)(?:\.git)?/?", parts.path)
    return f"{match.group(1)}/{match.group(2)}" if match else None


def run_on_github(args: argparse.Namespace, settings: Settings, repo: str, run_id: str,
                  progress: Callable[[str], None]) -> int:
    """Token (or App) mode: the same job as a webhook's, without the permission check, ending in a PR."""
    from bot.github.auth import credentials_from
    from bot.github.forge import GitHubForge
    from bot.github.job import JobContext, run_github_job
    from bot.github.work import Dispatch, Issue

    forge = GitHubForge(credentials_from(settings))
    if args.issue is not None:
        work: Issue | Dispatch = Issue(repo=repo, number=args.issue, sender_login="", instructions=args.task or "")
    else:
        work = Dispatch(repo=repo, sender_login="", sender_type="User", instructions=args.task, base_ref=args.base)
    conclusion = run_github_job(JobContext(work, settings, forge, run_id, authorize=False, progress=progress))
    if conclusion.ran is not None:
        report(conclusion.ran, None)
    if conclusion.pr_url:
        print(f"pull request: {conclusion.pr_url}")
    if conclusion.state == "failed":  # one line; the tracking comment and the PR hold the rest
        error = ConfigError if conclusion.exit_code == 2 else DecodeError
        raise error((conclusion.message or "failed").splitlines()[0].removeprefix("❌ "))
    if conclusion.state == "skipped":
        print(f"decode: did not run: {conclusion.message.splitlines()[0]}", file=sys.stderr)
        return 1
    return conclusion.exit_code


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
    where = delivered_to or (ran.workspace.clean if ran.workspace else "")
    if result.commit:
        print(f"commit: {result.commit}")
        print(f"changed: {', '.join(result.changed)}")
        print(f"repository: {where}")
    else:
        print("commit: none (the agent made no changes)")
    if figures is not None:
        u = figures.usage
        print(f"figures: {figures.turns} turns, {u.input_tokens:,} in / {u.output_tokens:,} out / "
              f"{u.cache_read_tokens:,} cache read / {u.cache_creation_tokens:,} cache write tokens, "
              f"${figures.cost_usd:.4f}, {figures.seconds:.1f}s")
    print(ran.verification.line())
    print(f"transcript: {ran.transcript_md}")
    print(f"transcript (jsonl): {ran.transcript_jsonl}")
    if result.stop_reason == "interrupted":
        kept = f"the work so far is commit {result.commit[:12]} on branch {ran.job.branch} in {where}" \
            if result.commit else "the agent had made no changes"
        print(f"decode: interrupted: {kept}; the transcript is {ran.transcript_md}", file=sys.stderr)
    elif result.stop_reason != "completed":
        print(f"decode: {ran.agent.summary.splitlines()[0]}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
