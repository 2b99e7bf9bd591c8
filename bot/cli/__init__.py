"""The `decode` command line: the parser, and the dispatch to one module per command.

`decode run` (bot/cli/run.py) is the headless run; progress goes to stderr, the
results (branch, commit, transcript paths) to stdout. `decode check` (check.py),
`decode runs` (runs.py) and `decode cache` (cache.py) read the settings, a
repository and the data directory; `decode image build` builds the docker sandbox's image
(bot/sandbox/images.py); `decode eval` (eval.py) runs a task file and measures it; `decode serve`, `decode worker`
(bot/server/run.py) and `decode action` (bot/action.py) start the other doors.
Exit status: 0 when the agent finished, 3 when it stopped at a budget cap (the
partial work is still handed back), 1 for an error, 2 for bad usage or
configuration, 130 when interrupted (Ctrl-C or SIGTERM: the work so far is
committed on the run branch, the sandbox removed and the transcript written; the
last lines say where). Errors are one line.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import signal
import sys
import threading
from typing import NoReturn

from bot.cli.streams import crash_report, guarded_streams, one_line_logs
from bot.config import Settings
from bot.core.errors import ConfigError, DecodeError, Interrupted
from bot.core.extras import requires_extra


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line like every other error."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def version() -> str:
    """The installed distribution's version."""
    try:
        return importlib.metadata.version("decode-bot")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


EXIT_STATUS = """exit status: 0 done or nothing to change, 1 failed, 2 a bad setting or input (one line
naming the fix), 3 stopped by a budget cap or a sandbox that kept dying (DECODE_MAX_RESTARTS; partial work
committed), 130 interrupted."""

SETTINGS = """settings (environment; every one in docs/settings.md): ANTHROPIC_API_KEY,
ANTHROPIC_BASE_URL, DECODE_MODEL (scripted:FILE replays a session), SANDBOX_MODE
(local, bwrap, docker, modal), DECODE_SANDBOX_IMAGE, GITHUB_TOKEN or GITHUB_APP_ID
with GITHUB_APP_PRIVATE_KEY[_PATH], GITHUB_API_URL, DECODE_DATA_DIR, budgets
DECODE_MAX_TURNS, DECODE_MAX_TOKENS, DECODE_MAX_COST_USD, DECODE_TIMEOUT_MINUTES."""

RUN_HELP = """reads: ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, DECODE_MODEL, SANDBOX_MODE,
DECODE_SANDBOX_IMAGE, DECODE_DATA_DIR, GITHUB_TOKEN (a GitHub repository: branch and
pull request), GITHUB_API_URL, the budgets DECODE_MAX_TURNS, DECODE_MAX_TOKENS,
DECODE_MAX_COST_USD, DECODE_TIMEOUT_MINUTES (the flags override them), DECODE_MAX_DISK_MB,
DECODE_MAX_MEMORY_MB, DECODE_MAX_RESTARTS, DECODE_KEEP_DAYS; the repository's .github/decode.yml (docs/decode-yml.md).

""" + EXIT_STATUS

SERVE_HELP = """reads: GITHUB_APP_ID with GITHUB_APP_PRIVATE_KEY or GITHUB_APP_PRIVATE_KEY_PATH (or
GITHUB_TOKEN), GITHUB_WEBHOOK_SECRET, ANTHROPIC_API_KEY, DECODE_MODEL, SANDBOX_MODE,
DECODE_SANDBOX_IMAGE, DECODE_POOL_SIZE, DECODE_DATA_DIR, DECODE_DATABASE_URL (default: SQLite
in the data dir), DECODE_WORKERS, DECODE_LEASE_SECONDS, DECODE_MAX_ATTEMPTS,
DECODE_SHUTDOWN_GRACE_SECONDS, DECODE_PUBLIC_URL (links to live transcript pages),
GITHUB_CLIENT_ID and GITHUB_CLIENT_SECRET (dashboard sign-in), DECODE_METRICS_TOKEN,
DECODE_TRIGGER_LABEL, DECODE_COMMAND, GITHUB_API_URL, DECODE_HEALTH_RECHECK_SECONDS.

the model: decode serve and decode worker check ANTHROPIC_API_KEY and DECODE_MODEL at start, as decode
run does; a failed check does not stop them: it is logged, /healthz answers 503 naming it, and jobs wait
in the store (none fails on its issue) until a recheck, every DECODE_HEALTH_RECHECK_SECONDS, passes.

setup mode: with neither App credentials nor GITHUB_TOKEN (nor an App that /setup stored in
the data dir), the server starts in setup mode: /webhook answers 503 and the log names the
/setup URL that creates the GitHub App in one click (docs/setup.md).

exit status: 0 stopped, 1 GitHub unreachable, 2 a bad setting (one line naming the fix) or a
port in use."""

CHECK_HELP = """Validates the settings and a .github/decode.yml (--file PATH; else a local repository's working
tree, with a note when it differs from the committed file a run reads; else a GitHub repository's default
branch) and says what a run would do there: model, sandbox and image, setup commands, network, verify,
setup cache, budget. Needs no API key: without ANTHROPIC_API_KEY the model is not checked (it says so).
Nothing is started or sent.
exit status: 0 valid, 2 a setting or decode.yml to fix (one line naming it), a missing sandbox image among them."""

IMAGE_HELP = """Builds the docker sandbox's image on this machine with the script that ships in the package:
debootstrap makes a Debian root, `docker import` makes it an image (python3, git, pip and venv, a C toolchain,
curl, node and npm). Needs root (debootstrap), debootstrap and a running Docker engine; a few minutes.
An image that exists and carries that toolchain is kept unless --force.
exit status: 0 the image is there, 1 the build failed, 2 something to fix first (one line naming it)."""


EVAL_HELP = """Each line of TASKS.jsonl: {"id", "repo" (a local path, git URL or OWNER/NAME), "base" (commit or
branch), "task", "check" (a shell command run in the sandbox: exit 0 = resolved)}. The check runs on the base
first (passing there: `invalid`, the model is not asked), then on the run's result. DIR/results.jsonl gets one
object a task: id, status (resolved, unresolved, invalid, error), turns, cost_usd, seconds, branch, transcript.
--from-history REPO --write TASKS.jsonl makes a task file from REPO's merged pull requests that changed tests
(GITHUB_TOKEN). Guide: docs/eval.md.
exit status: 0 every task ran, 1 a task errored, 2 a bad input or setting (one line naming the fix)."""


def add_eval_parser(sub: argparse._SubParsersAction) -> None:
    """`decode eval`'s arguments."""
    p = sub.add_parser("eval", help="run a task file and measure how many tasks the agent resolves",
                       description=EVAL_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("tasks", nargs="?", metavar="TASKS.jsonl", help="the task file (one JSON object a line)")
    p.add_argument("--out", metavar="DIR", help="where results.jsonl and the checks' logs go "
                                                "(default: decode-eval-YYYYmmdd-HHMMSS)")
    p.add_argument("--parallel", type=int, default=1, metavar="N", help="run N tasks at once (default 1)")
    p.add_argument("--max-turns", type=int, help="turn cap of each task (DECODE_MAX_TURNS)")
    p.add_argument("--max-cost", type=float, help="cost cap in USD of each task (DECODE_MAX_COST_USD)")
    p.add_argument("--attempts", type=int, default=1, metavar="N", help="N attempts of each task (1-5): the "
                                                                        "verify-picked score and pass@N side by side")
    p.add_argument("--test-cmd", metavar="CMD", help="SWE-bench instances: the command that runs the tests and prints "
                                                     "each one's status, e.g. 'python3 -m pytest -rA' (an instance's "
                                                     "own test_cmd wins)")
    p.add_argument("--from-history", metavar="REPO", help="write tasks from REPO's merged pull requests (OWNER/NAME)")
    p.add_argument("--limit", type=int, default=20, metavar="N", help="with --from-history: at most N tasks "
                                                                       "(default 20)")
    p.add_argument("--write", metavar="TASKS.jsonl", help="with --from-history: the task file to write")


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
    run.add_argument("--attempts", type=int, metavar="N", help="run N attempts at once (1-5) and keep the best: the first "
                                                         "that passes verify, then the fewest changed lines "
                                                         "(default: decode.yml's attempts, else 1)")
    run.add_argument("--plan", action="store_true", help="print a plan for the task (or --issue) and change nothing")
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
    check.add_argument("--start", action="store_true", help="start each MCP server of decode.yml in a sandbox "
                                                             "(after setup) and list its tools (a local repository)")
    check.add_argument("--file", metavar="PATH", help="check this decode.yml instead of the repository's")
    image = sub.add_parser("image", help="the docker sandbox's image: build it on this machine")
    build = image.add_subparsers(dest="image_command", required=True).add_parser(
        "build", help="build the sandbox image (needs root and a Docker engine)", description=IMAGE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    build.add_argument("image", nargs="?", help="the image to build (default: DECODE_SANDBOX_IMAGE, else "
                                                "decode-sandbox:latest)")
    build.add_argument("--force", action="store_true", help="rebuild even when the image exists")
    cache = sub.add_parser("cache", help="the setup cache (docker, bwrap, modal) and the repository mirrors: list "
                                         "or clear them")
    cache_sub = cache.add_subparsers(dest="cache_command", required=True)
    cache_sub.add_parser("list", help="one line per entry: key, repository, age, size, last used")
    clear = cache_sub.add_parser("clear", help="remove one entry (KEY or a prefix of it) or --all")
    clear.add_argument("key", nargs="?", help="the entry's key, or its first characters as `decode cache list` shows")
    clear.add_argument("--all", action="store_true", help="remove every entry")
    runs = sub.add_parser("runs", help="the runs DECODE_DATA_DIR holds, newest first: id, repository, state, "
                                       "PR or branch, cost, time")
    runs.add_argument("--limit", type=int, default=20, help="show at most N runs (default 20)")
    runs.add_argument("--before", metavar="ID", help="the page after the one that ends with run ID (older runs)")
    add_eval_parser(sub)
    return parser


INTERRUPTED = 130
GIT_COMMANDS = ("run", "check", "eval", "serve", "worker")  # and the Action, once its outputs can say it


def main(argv: list[str] | None = None) -> int:
    """The console script `decode`: parse `argv` (default: the process's), run the command; the exit status.
    Standard streams whose other end is closed are dealt with first (bot/cli/streams.py)."""
    with guarded_streams() as stderr_closed:
        if stderr_closed:
            print(stderr_closed)
            return 2
        try:
            args = build_parser().parse_args(argv)
        except KeyboardInterrupt:  # before any work: nothing to keep
            print("decode: interrupted", file=sys.stderr)
            return INTERRUPTED
        if args.command not in ("serve", "worker"):
            one_line_logs()
        if args.command in ("run", "action", "eval"):
            with sigterm_interrupts():
                return _main(args)
        return _main(args)


def _main(args: argparse.Namespace) -> int:
    try:
        if args.command in GIT_COMMANDS:
            from bot.workspace.clone import require_git

            require_git()
        if args.command == "action":
            from bot.action import run_action

            return run_action()
        settings = Settings.from_env()
        if args.command in ("run", "eval", "serve", "worker"):
            from bot.sandbox import preflight

            preflight(settings.sandbox.mode)  # before any clone or job: e.g. Modal's credentials
        if args.command in ("serve", "worker"):
            from bot.github.app_credentials import with_stored_app
            with requires_extra("server", f"decode {args.command}"):
                from bot.server import run as server

            # the App /setup created, unless the environment sets one
            settings = settings.replace(github=with_stored_app(settings.github, settings.store.data_dir))

            if args.workers is not None:
                from bot.config.table import MAX_WORKERS

                if not 0 <= args.workers <= MAX_WORKERS:
                    raise ConfigError(f"--workers {args.workers} is not valid: give how many jobs this process runs "
                                      f"at once, 0 (decode serve: intake only) to {MAX_WORKERS}")
                settings = settings.replace(workers=args.workers)
            if args.command == "serve":
                return server.serve(settings, args.host, args.port)
            return server.work(settings, args.host, args.port)
        if args.command == "cache":
            from bot.cli.cache import cmd_cache

            return cmd_cache(args, settings)
        if args.command == "image":
            from bot.sandbox.images import build

            return build(args.image or settings.sandbox.image, args.force)
        if args.command == "check":
            from bot.cli.check import cmd_check

            return cmd_check(args, settings)
        if args.command == "eval":
            from bot.cli.eval import cmd_eval

            return cmd_eval(args, settings)
        if args.command == "runs":
            from bot.cli.runs import cmd_runs

            return cmd_runs(args, settings.store.data_dir)
        from bot.cli.run import cmd_run

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
    except Exception as e:  # noqa: BLE001 (the last guard: one line, never a traceback on the terminal)
        return unexpected(e)


def unexpected(e: Exception) -> int:
    """One line for an error no check foresaw. An OSError on a path (a data dir that cannot be written, a full
    disk) names the path: exit 2. Anything else is a bug: its traceback goes to a private file the line names,
    for the report: exit 1."""
    if isinstance(e, OSError) and e.filename:
        print(f"decode: {e.filename}: {e.strerror or e}: check that this user may write there (DECODE_DATA_DIR, "
              "or the path given)", file=sys.stderr)
        return 2
    path = crash_report(e)
    print(f"decode: unexpected {type(e).__name__}: {e}; this is a bug in decode-bot: please report it with "
          f"{path}, which holds its traceback", file=sys.stderr)
    return 1


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
