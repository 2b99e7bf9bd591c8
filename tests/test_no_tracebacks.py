"""A new user's mistakes, tried again (issue 33, "Done when": no traceback in the same 105 tries): bad flags and
values, bad settings (budgets, URLs, keys and tokens, the data dir, the provider), bad decode.yml files, bad task
files, bad Action inputs, streams that cannot be written, server addresses that do not resolve. Each row is one
process of a real entry point: the installed `decode` console script, or the Action as action.yml starts it
(`python -m bot.cli action`), against the fake GitHub; the model is a scripted session (rows that need the
Anthropic API are refused before any request). Every row asserts: no traceback on either stream, no crash
report (but in the row of a bug nobody can foresee: a garbled GitHub answer), the exit status of the README's
table, and the last line of stderr naming the fix.

The rows run at once in one module fixture (a few processes at a time, most of them stop in well under a
second), then each row is its own test case; tests/test_exit_statuses.py holds the table of situations x doors
and is not repeated here. A row marked `shell` is a bash line (`$DECODE` is the console script), for
redirections.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import make_repo
from tests.fakes.github import FakeGitHub, openapi_routes
from tests.support.action import rewritten
from tests.support.cli import DECODE, EXAMPLE
from tests.test_entry_points import FILES, NAME, NOTE, OWNER, REPO, TASK, free_port

LOCAL = ("run", "--repo", "{repo}", TASK)
CHECK = ("check", "--repo", "{repo}")
ACTION = ("{action}",)
TOKEN_MODE = {"GITHUB_APP_ID": "", "GITHUB_APP_PRIVATE_KEY": ""}  # GITHUB_TOKEN alone, as a CLI user has it
REAL_MODEL = {"DECODE_MODEL": ""}  # the default model, on the Anthropic API
YML = {  # decode.yml files a user gets wrong, by name
    "dup": "network: true\nnetwork: false\n", "wrongtype": 'network: "yes"\n', "unknown": "netwrk: true\n",
    "notyaml": "::: [\n", "list": "- a\n- b\n", "setup5": "setup: 5\n", "verify": "verify: [1, 2]\n",
    "attempts": "attempts: 9\n", "mcp": "mcp:\n  x: 3\n", "image": 'image: "Bad Image!"\n', "thinking": "thinking: maybe\n",
    "tab": "network: true\n\tsetup: x\n",
}
TASKS = {  # eval task files a user gets wrong, by name
    "empty": "", "notjson": "not json\n", "norepo": '{"id": "t1"}\n', "list": "[1, 2]\n",
    "dupid": "{ok}\n{ok}\n", "checktype": '{"id": "t1", "repo": "{repo}", "base": "main", "task": "x", "check": 5}\n',
    "blank": '{"id": "t1", "repo": "{repo}", "base": "main", "task": " ", "check": "true"}\n', "ok": "{ok}\n",
}
OK_TASK = '{"id": "t1", "repo": "{repo}", "base": "main", "task": "x", "check": "true"}'


@dataclass(frozen=True)
class Try:
    """One try: `argv` after `decode` ({repo}, {badyml}, {tmp}, {port}, {garbled}, {yml:NAME}, {tasks:NAME}; a
    first word `{action}` is the Action's entry point), `env` on top of the row's base, what it exits with and
    a fragment of the last line of stderr (of stdout for a 0)."""

    argv: tuple[str, ...]
    code: int
    says: str
    env: dict[str, str] = field(default_factory=dict)
    shell: bool = False
    crash: bool = False  # a bug decode-bot cannot foresee: its traceback in a crash report the line names


TRIES: dict[str, Try] = {
    # the command line itself
    "no command": Try((), 2, "the following arguments are required: command (see decode --help)"),
    "an unknown command": Try(("nosuch",), 2, "invalid choice: 'nosuch'"),
    "run outside a repository": Try(("run", TASK), 2, ". is not in a git repository: give a repository's path"),
    "run without a task": Try(("run", "--repo", "{repo}"), 2, "give a TASK (or --task-file PATH), or --issue N"),
    "--max-turns -1": Try(("run", "--max-turns", "-1", *LOCAL[1:]), 2, "--max-turns -1 is not valid: give a positive"),
    "--timeout-minutes 1e400": Try(("run", "--timeout-minutes", "1e400", *LOCAL[1:]), 2,
                                   "--timeout-minutes inf is not valid"),
    "--attempts 6": Try(("run", "--attempts", "6", *LOCAL[1:]), 2, "--attempts must be a whole number from 1 to 5"),
    "--attempts 0": Try(("run", "--attempts", "0", *LOCAL[1:]), 2, "--attempts must be a whole number from 1 to 5"),
    "--attempts x": Try(("run", "--attempts", "x", *LOCAL[1:]), 2, "argument --attempts: invalid int value: 'x'"),
    "--issue abc": Try(("run", "--repo", REPO, "--issue", "abc"), 2, "argument --issue: invalid int value"),
    "--issue on a local path": Try(("run", "--repo", "{repo}", "--issue", "1"), 2,
                                   "--issue needs a GitHub repository (owner/name or its URL) and GITHUB_TOKEN"),
    "--issue -1": Try(("run", "--repo", REPO, "--issue", "-1"), 2, "--issue -1 is not valid: give the number of"),
    "--issue 0": Try(("run", "--repo", REPO, "--issue", "0"), 2, "--issue 0 is not valid: give the number of an"),
    "an issue GitHub answers with a list": Try(("run", "--repo", REPO, "--issue", "{garbled}"), 1,
                                               "object has no attribute 'login'", crash=True, env=TOKEN_MODE),
    "--task-file a directory": Try(("run", "--repo", "{repo}", "--task-file", "{tmp}"), 2, "cannot read it (Is a"),
    "--task-file not UTF-8": Try(("run", "--repo", "{repo}", "--task-file", "{tmp}/binary"), 2, "not UTF-8 text"),
    "--repo a file": Try(("run", "--repo", "{tmp}/binary", TASK), 2, "is not in a git repository"),
    "--repo with credentials": Try(("run", "--repo", "https://user:pass@example.com/x.git", TASK), 2,
                                   "the repository URL contains credentials: remove them and set GITHUB_TOKEN"),
    "--repo not a name": Try(("run", "--repo", "not a repo!!", TASK), 2, "no such path, and not owner/name"),
    "--repo empty": Try(("run", "--repo", "", TASK), 2, ". is not in a git repository"),
    "--repo ftp://": Try(("run", "--repo", "ftp://example.com/repo.git", TASK), 2,
                     "git cannot clone over ftp://: give an https://, ssh:// or file:// URL"),
    "--repo file:// of nothing": Try(("run", "--repo", "file:///nonexistent/x", TASK), 2,
                                     "/nonexistent/x does not exist: give the path of a repository on this machine"),
    "--base nosuch on GitHub": Try(("run", "--repo", REPO, "--base", "nosuch", TASK), 2,
                                   "base 'nosuch' is neither a branch, a tag nor a commit"),
    "--base empty": Try(("run", "--base", "", *LOCAL[1:]), 2, "no branch, tag or commit of"),
    "a committed decode.yml with a key twice": Try(("run", "--repo", "{badyml}", TASK), 2,
                                                   "the key 'network' is given twice (first on line 1): keep one"),
    # settings
    **{f"{var}={value}": Try(LOCAL, 2, f"{var}={value!r} is not valid: set it to {fix}", env={var: value})
       for var, value, fix in (
           ("DECODE_MAX_TURNS", "abc", "a positive int"), ("DECODE_MAX_TURNS", "0", "a positive int"),
           ("DECODE_MAX_TOKENS", "1.5", "a positive int"), ("DECODE_MAX_DISK_MB", "abc", "a positive int"),
           ("DECODE_MAX_MEMORY_MB", "-5", "a positive int"), ("DECODE_MAX_RESTARTS", "-1", "how many times"),
           ("DECODE_KEEP_DAYS", "x", "a positive float"), ("DECODE_TIMEOUT_MINUTES", "nan", "a positive float"),
           ("SANDBOX_MODE", "Docker", "one of local, bwrap, docker, modal"),
           ("DECODE_THINKING", "bogus", "on, off or a thinking budget"),
           ("DECODE_PROVIDER", "azure", "one of anthropic, bedrock, vertex"),
           ("ANTHROPIC_BASE_URL", "not-a-url", "an http:// or https:// URL"),
           ("ANTHROPIC_BASE_URL", "ftp://x", "an http:// or https:// URL"),
           ("GITHUB_API_URL", "not a url", "an http:// or https:// URL (default https://api.github.com)"))},
    "DECODE_MIRROR_MB=-1": Try(LOCAL, 2, "DECODE_MIRROR_MB must be a whole number of megabytes",
                               env={"DECODE_MIRROR_MB": "-1"}),
    "DECODE_PRICES not JSON": Try(LOCAL, 2, "DECODE_PRICES is not valid: set it to JSON like",
                                  env={"DECODE_PRICES": "not json"}),
    "DECODE_PRICES a list": Try(LOCAL, 2, "DECODE_PRICES is not valid", env={"DECODE_PRICES": "[1]"}),
    "DECODE_DATA_DIR ~ of nobody": Try(("runs",), 2, "the home directory of `~` is unknown here: set DECODE_DATA_DIR"
                                       " to an absolute path", env={"DECODE_DATA_DIR": "~nosuchuser/x"}),
    "DECODE_MODEL=scripted: of a task file": Try(LOCAL, 2, "not a session or transcript file (it holds no model turns)",
                                                 env={"DECODE_MODEL": "scripted:{tasks:ok}"}),
    "DECODE_MODEL=scripted: of a directory": Try(LOCAL, 2, "cannot read the script (Is a directory)",
                                                 env={"DECODE_MODEL": "scripted:{tmp}"}),
    "ANTHROPIC_BASE_URL not a URL on check": Try(CHECK, 2, "ANTHROPIC_BASE_URL='http://[::1' is not valid",
                                                 env={**REAL_MODEL, "ANTHROPIC_BASE_URL": "http://[::1"}),
    "ANTHROPIC_API_KEY with a line break": Try(LOCAL, 2, "ANTHROPIC_API_KEY holds a space, a line break or",
                                               env={**REAL_MODEL, "ANTHROPIC_API_KEY": "sk-ant-api03\nxyz"}),
    "ANTHROPIC_API_KEY with a space": Try(CHECK, 2, "ANTHROPIC_API_KEY holds a space",
                                          env={**REAL_MODEL, "ANTHROPIC_API_KEY": "sk-ant-api03 xyz"}),
    "GITHUB_TOKEN with a space": Try(("run", "--repo", REPO, TASK), 2, "GITHUB_TOKEN holds a space",
                                     env={"GITHUB_TOKEN": "ghp_ x"}),
    "DECODE_MODEL with a line break": Try(LOCAL, 2, "DECODE_MODEL is blank or holds a line break",
                                          env={**REAL_MODEL, "DECODE_MODEL": "claude-sonnet-4-5\n"}),
    "DECODE_METRICS_TOKEN with a line break": Try(("worker", "--port", "{port}"), 2,
                                                  "DECODE_METRICS_TOKEN holds a space, a line break",
                                                  env={"DECODE_METRICS_TOKEN": "s3cret\nx"}),
    "serve, a blank GITHUB_WEBHOOK_SECRET": Try(("serve", "--port", "{port}"), 2,
                                                "GITHUB_WEBHOOK_SECRET is blank or holds a line break",
                                                env={"GITHUB_WEBHOOK_SECRET": "   "}),
    "run, no git on PATH": Try(LOCAL, 2, "git is not on PATH: install git", env={"PATH": "{tmp}"}),
    "check, no git on PATH": Try(CHECK, 2, "git is not on PATH: install git", env={"PATH": "{tmp}"}),
    "action, no git on PATH": Try(ACTION, 2, "git is not on PATH: install git", env={"PATH": "{tmp}"}),
    # streams
    "stdout on a full disk": Try(('"$DECODE" check --repo "$REPO" >/dev/full',), 0,
                                 "standard output could not be written (No space left on device)", shell=True),
    "cache list, stdout closed": Try(('"$DECODE" cache list >&-',), 0, "", shell=True),
    "action, stderr closed": Try(('$ACTION 2>&-',), 2, "standard error is closed", shell=True),
    # decode check
    "check --file missing": Try(("check", "--repo", "{repo}", "--file", "{tmp}/nope.yml"), 2,
                                "nope.yml: No such file or directory: name the decode.yml to check"),
    "check --file a directory": Try(("check", "--repo", "{repo}", "--file", "{tmp}"), 2, ": Is a directory: name"),
    "check --file empty": Try(("check", "--repo", "{repo}", "--file", "/dev/null"), 0, "ok: a run would start"),
    "check --file binary": Try(("check", "--repo", "{repo}", "--file", "{tmp}/binary"), 2, "is not valid YAML"),
    **{f"check --file {name}": Try(("check", "--repo", "{repo}", "--file", f"{{yml:{name}}}"), 2, says)
       for name, says in (("dup", "the key 'network' is given twice"), ("wrongtype", "'network' must be true or false"),
                          ("unknown", "unknown key 'netwrk'; the keys are"), ("notyaml", "is not valid YAML: line 2"),
                          ("list", "must be a mapping with the keys"), ("setup5", "'setup' must be a command or a list"),
                          ("verify", "'verify' must be a command or a list"),
                          ("attempts", "'attempts' must be a whole number from 1 to 5"),
                          ("mcp", "mcp: x must be a mapping"), ("image", "'image' must be a docker image reference"),
                          ("thinking", "thinking='maybe' is not valid"), ("tab", "found character '\\t'"))},
    "check --file without --repo": Try(("check", "--file", "{yml:dup}"), 2, "the key 'network' is given twice"),
    "check, the working tree's decode.yml": Try(("check", "--repo", "{badyml}"), 2, "the key 'network' is given twice"),
    "check outside a repository": Try(("check",), 2, ". is not in a git repository"),
    "check --repo a missing path": Try(("check", "--repo", "{tmp}/nope"), 2, "no such path, and not owner/name"),
    "check --repo owner/nosuch": Try(("check", "--repo", f"{OWNER}/nosuch"), 2, "cannot be read with this token"),
    "check --start on GitHub": Try(("check", "--repo", REPO, "--start"), 2, "--start needs a local repository"),
    "check, no Modal token": Try(CHECK, 2, "SANDBOX_MODE=modal needs Modal credentials",
                                 env={"SANDBOX_MODE": "modal", "MODAL_TOKEN_ID": "", "MODAL_TOKEN_SECRET": ""}),
    "check, a missing session": Try(CHECK, 2, "DECODE_MODEL=scripted:/nope: no file /nope",
                                    env={"DECODE_MODEL": "scripted:/nope"}),
    "check, no API key": Try(CHECK, 0, "ok: the settings and decode.yml are valid; a run needs ANTHROPIC_API_KEY too",
                             env={**REAL_MODEL, "ANTHROPIC_API_KEY": ""}),
    # decode runs and decode cache
    "runs, empty data dir": Try(("runs",), 0, "no runs in"),
    "runs --limit 0": Try(("runs", "--limit", "0"), 2, "--limit 0 is not valid: give a positive whole number"),
    "runs --limit abc": Try(("runs", "--limit", "abc"), 2, "argument --limit: invalid int value"),
    "runs --before nosuch": Try(("runs", "--before", "nosuch"), 2, "--before nosuch: there is no such run"),
    "runs, a damaged runs.index": Try(('mkdir -p "$DECODE_DATA_DIR/runs" && echo garbage > "$DECODE_DATA_DIR/runs.index"'
                                       ' && "$DECODE" runs',), 0, "no runs in", shell=True),
    "cache without a command": Try(("cache",), 2, "the following arguments are required: cache_command"),
    "cache clear without a key": Try(("cache", "clear"), 2, "takes either a KEY"),
    "cache clear nosuchkey": Try(("cache", "clear", "nosuchkey"), 2, "no setup cache entry or mirror has the key"),
    "cache clear --all KEY": Try(("cache", "clear", "--all", "x"), 2, "takes either a KEY"),
    "cache frob": Try(("cache", "frob"), 2, "invalid choice: 'frob'"),
    "image without a command": Try(("image",), 2, "the following arguments are required: image_command"),
    "image build two images": Try(("image", "build", "a", "b"), 2, "unrecognized arguments: b"),
    # decode eval
    **{f"eval, task file {name}": Try(("eval", f"{{tasks:{name}}}"), 2, says) for name, says in (
        ("empty", "no tasks in it"), ("notjson", ":1: not JSON"), ("norepo", "the field 'repo' is missing"),
        ("list", "not an object"), ("dupid", "the id 't1' is also on line 1"), ("checktype", "'check' is a number"),
        ("blank", "the field 'task' is blank"))},
    "eval --out a file": Try(("eval", "{tasks:ok}", "--out", "{tmp}/binary"), 2, "cannot write results.jsonl there"),
    "eval --parallel 0": Try(("eval", "{tasks:ok}", "--parallel", "0"), 2, "--parallel 0 is not valid"),
    "eval --max-turns 0": Try(("eval", "{tasks:ok}", "--max-turns", "0"), 2, "--max-turns 0 is not valid"),
    "eval a directory": Try(("eval", "{tmp}"), 2, "cannot read the task file (Is a directory)"),
    "eval a binary": Try(("eval", "{tmp}/binary"), 2, "not UTF-8 text"),
    "eval without a file": Try(("eval",), 2, "give a task file (decode eval TASKS.jsonl)"),
    "eval --from-history without --write": Try(("eval", "--from-history", REPO), 2, "needs --write TASKS.jsonl"),
    "eval --from-history owner/nosuch": Try(("eval", "--from-history", f"{OWNER}/nosuch", "--write", "{tmp}/t.jsonl"),
                                            2, "cannot be read with this token"),
    # serve and worker
    "serve, no key file": Try(("serve", "--port", "{port}"), 2, "GITHUB_APP_PRIVATE_KEY_PATH=/nonexistent: cannot read",
                              env={"GITHUB_APP_PRIVATE_KEY": "", "GITHUB_APP_PRIVATE_KEY_PATH": "/nonexistent"}),
    "serve, a key that is no PEM": Try(("serve", "--port", "{port}"), 2, "GITHUB_APP_PRIVATE_KEY is not valid",
                                       env={"GITHUB_APP_PRIVATE_KEY": "nope"}),
    "serve, DECODE_WORKERS=-1": Try(("serve", "--port", "{port}"), 2, "DECODE_WORKERS='-1' is not valid",
                                    env={"DECODE_WORKERS": "-1"}),
    "serve, a MySQL URL": Try(("serve", "--port", "{port}"), 2, "DECODE_DATABASE_URL is not valid (mysql)",
                              env={"DECODE_DATABASE_URL": "mysql://x"}),
    "serve, DECODE_PUBLIC_URL not a URL": Try(("serve", "--port", "{port}"), 2, "DECODE_PUBLIC_URL='notaurl' is not",
                                              env={"DECODE_PUBLIC_URL": "notaurl"}),
    "serve --host 999.1.1.1": Try(("serve", "--host", "999.1.1.1", "--port", "{port}"), 2,
                                  "give an address of this machine (127.0.0.1, 0.0.0.0, ::)"),
    "serve --host empty": Try(("serve", "--host", "", "--port", "{port}"), 2, "give an address of this machine"),
    "serve --port abc": Try(("serve", "--port", "abc"), 2, "argument --port: invalid int value"),
    "serve --workers -1": Try(("serve", "--port", "{port}", "--workers", "-1"), 2, "--workers -1 is not valid"),
    "serve --workers 999999999999": Try(("serve", "--port", "{port}", "--workers", "999999999999"), 2,
                                        "0 (decode serve: intake only) to 256"),
    "serve, DECODE_WORKERS=100000": Try(("serve", "--port", "{port}"), 2, "(at most 256)",
                                        env={"DECODE_WORKERS": "100000"}),
    "worker --host nosuch.invalid": Try(("worker", "--host", "nosuch.invalid", "--port", "{port}"), 2,
                                        "--host nosuch.invalid: "),
    "worker, DECODE_LEASE_SECONDS=abc": Try(("worker",), 2, "DECODE_LEASE_SECONDS='abc' is not valid",
                                            env={"DECODE_LEASE_SECONDS": "abc"}),
    "worker, DECODE_PUBLIC_URL ftp": Try(("worker",), 2, "DECODE_PUBLIC_URL='ftp://x' is not valid",
                                         env={"DECODE_PUBLIC_URL": "ftp://x"}),
    "worker, PostgreSQL down": Try(("worker",), 1, "cannot open the job store postgresql://nouser@127.0.0.1:1/x",
                                   env={"DECODE_DATABASE_URL": "postgresql://nouser@127.0.0.1:1/x"}),
    # the Action, as action.yml starts it
    "action outside Actions": Try(ACTION, 2, "GITHUB_EVENT_NAME is not set: run `decode action` inside GitHub Actions",
                                  env={"GITHUB_EVENT_NAME": ""}),
    "action without GITHUB_REPOSITORY": Try(ACTION, 2, "GITHUB_REPOSITORY is not set",
                                            env={"GITHUB_REPOSITORY": ""}),
    "action without GITHUB_EVENT_PATH": Try(ACTION, 2, "GITHUB_EVENT_PATH is not set",
                                            env={"GITHUB_EVENT_PATH": ""}),
    "action on a push": Try(ACTION, 0, "decode-bot: skipped (event 'push' is not one decode-bot acts on)",
                            env={"GITHUB_EVENT_NAME": "push"}),
    "action, GITHUB_OUTPUT a directory": Try(ACTION, 2, "GITHUB_OUTPUT={tmp}: cannot write it (Is a directory)",
                                             env={"GITHUB_EVENT_NAME": "push", "GITHUB_OUTPUT": "{tmp}"}),
    "action, GITHUB_STEP_SUMMARY unwritable": Try(ACTION, 2, "GITHUB_STEP_SUMMARY={tmp}/binary/x: cannot write it",
                                                  env={"GITHUB_EVENT_NAME": "push",
                                                       "GITHUB_STEP_SUMMARY": "{tmp}/binary/x"}),
    "action, max_turns abc": Try(ACTION, 2, "DECODE_MAX_TURNS='abc' is not valid", env={"DECODE_MAX_TURNS": "abc"}),
    "action, sandbox nope": Try(ACTION, 2, "SANDBOX_MODE='nope' is not valid", env={"SANDBOX_MODE": "nope"}),
    "action, github_token empty": Try(ACTION, 2, "the github_token input is empty", env={"GITHUB_TOKEN": ""}),
    "action, anthropic_api_key empty": Try(ACTION, 2, "the anthropic_api_key input is empty",
                                           env={**REAL_MODEL, "ANTHROPIC_API_KEY": ""}),
    "action, anthropic_api_key with a space": Try(ACTION, 2, "ANTHROPIC_API_KEY holds a space",
                                                  env={**REAL_MODEL, "ANTHROPIC_API_KEY": "sk-ant x"}),
    "action, GITHUB_API_URL not a URL": Try(ACTION, 2, "GITHUB_API_URL='nope' is not valid",
                                            env={"GITHUB_API_URL": "nope"}),
    "action, a missing session": Try(ACTION, 2, "cannot read the script", env={"DECODE_MODEL": "scripted:{tmp}/no"}),
    "action, an argument": Try(("{action}", "extra"), 2, "unrecognized arguments: extra"),
}


@dataclass
class Ran:
    code: int | str
    stdout: str
    stderr: str
    tmp: Path


class World:
    """What the rows run against: the fake GitHub with octo/calendar and an issue, a clean local repository,
    one with a decode.yml that gives a key twice, the decode.yml and task files, and a directory per row."""

    def __init__(self, root: Path, github: FakeGitHub) -> None:
        self.root, self.github = root, github
        github.add_repo(OWNER, NAME, FILES)
        github.add_user("alice")
        github.set_permission(OWNER, NAME, "alice", "write")
        self.issue = github.add_issue(OWNER, NAME, "Weekend check is wrong", "Saturdays count.", user="alice")
        # an issue whose GET the fake answers 200 with a list (a proxy's page, a bug): nothing can foresee it
        self.garbled = github.add_issue(OWNER, NAME, "Garbled", "Its GET answers a list.", user="alice")
        github.inject("GET", rf"^/repos/{OWNER}/{NAME}/issues/{self.garbled}$", 200, body=[], times=100)
        self.repo = make_repo(root / "calendar", FILES)
        self.badyml = make_repo(root / "badyml", {**FILES, ".github/decode.yml": YML["dup"]})
        (root / "session.json").write_text(json.dumps(NOTE))
        (root / "event.json").write_text(json.dumps(rewritten("issues", "labeled", issue__number=self.issue,
                                                              label__name="agent")))
        for name, text in YML.items():
            (root / f"{name}.yml").write_text(text)
        for name, text in TASKS.items():
            (root / f"{name}.jsonl").write_text(text.replace("{ok}", OK_TASK).replace("{repo}", str(self.repo)))

    def env(self, tmp: Path) -> dict[str, str]:
        """Every setting a row starts from: the local sandbox, the scripted session, the fake GitHub as both a
        token and an App, the Action's variables."""
        return {"PATH": os.environ["PATH"], "HOME": str(tmp / "home"), "TMPDIR": str(tmp), "SANDBOX_MODE": "local",
                "DECODE_DATA_DIR": str(tmp / "data"), "DECODE_MODEL": f"scripted:{self.root / 'session.json'}",
                "PYTHONPATH": str(EXAMPLE.parents[1]), "ANTHROPIC_API_KEY": "sk-ant-never-sent",
                "GITHUB_API_URL": self.github.api_url, "GITHUB_TOKEN": self.github.token,
                "GITHUB_APP_ID": str(self.github.app_id), "GITHUB_APP_PRIVATE_KEY": self.github.private_key_pem,
                "GITHUB_WEBHOOK_SECRET": "s3cret", "GITHUB_EVENT_NAME": "issues",
                "GITHUB_EVENT_PATH": str(self.root / "event.json"), "GITHUB_REPOSITORY": REPO,
                "GITHUB_SERVER_URL": self.github.web_url, "GITHUB_RUN_ID": "1", "GITHUB_ACTIONS": "true",
                "GITHUB_ACTOR": "alice", "GITHUB_OUTPUT": str(tmp / "output"),
                "GITHUB_STEP_SUMMARY": str(tmp / "summary.md"), "CI": "true",
                "DECODE": DECODE, "ACTION": f"{sys.executable} -m bot.cli action", "REPO": str(self.repo)}

    def fill(self, text: str, tmp: Path) -> str:
        for name in YML:
            text = text.replace(f"{{yml:{name}}}", str(self.root / f"{name}.yml"))
        for name in TASKS:
            text = text.replace(f"{{tasks:{name}}}", str(self.root / f"{name}.jsonl"))
        return (text.replace("{repo}", str(self.repo)).replace("{garbled}", str(self.garbled)).replace("{badyml}", str(self.badyml))
                .replace("{tmp}", str(tmp)).replace("{port}", str(free_port())))

    def run(self, name: str, row: Try) -> Ran:
        """`row` as a process in a directory of its own (also its working directory: not a repository)."""
        tmp = self.root / "rows" / "".join(c if c.isalnum() else "-" for c in name)
        tmp.mkdir(parents=True)
        (tmp / "binary").write_bytes(b"\xff\xfe\x00not text")
        env = {**self.env(tmp), **{k: self.fill(v, tmp) for k, v in row.env.items()}}
        env = {k: v for k, v in env.items() if v != ""}
        argv = [self.fill(a, tmp) for a in row.argv]
        if row.shell:
            argv = ["bash", "-c", *argv]
        elif argv[:1] == ["{action}"]:
            argv = [sys.executable, "-m", "bot.cli", "action", *argv[1:]]
        else:
            argv = [DECODE, *argv]
        try:
            done = subprocess.run(argv, env=env, cwd=tmp, capture_output=True, text=True, timeout=90,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as e:
            return Ran("a timeout (90 s)", str(e.stdout), str(e.stderr), tmp)
        return Ran(done.returncode, done.stdout, done.stderr, tmp)


@pytest.fixture(scope="module")
def ran(tmp_path_factory) -> Iterator[dict[str, Ran]]:
    """Every row, four processes at a time (most wait on a subprocess or the fake GitHub, not the CPU)."""
    with FakeGitHub(openapi_routes()) as github:
        world = World(tmp_path_factory.mktemp("tries"), github)
        with ThreadPoolExecutor(4) as pool:
            results = dict(zip(TRIES, pool.map(world.run, TRIES, TRIES.values())))
        yield results
    assert not github.unknown and not github.unhandled, (github.unknown, github.unhandled)


@pytest.mark.parametrize("name", TRIES)
def test_a_mistake_is_one_line_naming_the_fix(ran: dict[str, Ran], name: str):
    row, done = TRIES[name], ran[name]
    says = row.says.replace("{tmp}", str(done.tmp))
    everything = f"exit {done.code}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    assert "Traceback" not in done.stdout + done.stderr, everything
    crashes = [line for line in done.stderr.splitlines() if "decode-crash-" in line]
    assert len(crashes) == row.crash, "a crash report: a bug, not a mistake\n" + everything
    for line in crashes:
        assert Path(re.search(r"(/\S+/decode-crash-\S+\.txt)", line)[1]).is_file(), everything
    assert done.code == row.code, everything
    said = done.stderr if done.stderr.strip() else done.stdout  # stderr closed: the line is on stdout
    lines = [line for line in said.splitlines() if line.strip()]
    if row.code == 0:
        assert says in done.stdout + done.stderr, everything
        return
    assert lines and says in lines[-1], everything
    assert lines[-1].startswith("decode"), everything
