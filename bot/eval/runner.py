"""One task of `decode eval`: its check on the base, the run through the real pipeline, its check on the result.

The check runs in a sandbox of the run's backend (SANDBOX_MODE), on a fresh clone of the commit it judges,
after the repository's decode.yml `setup:` (with network) and under decode.yml's network policy, exactly as
the agent's own commands would run; never in the agent's sandbox, so nothing the agent left behind there
(or did to the tests) counts. decode.yml is the task's base's for both checks, as the pipeline reads it, and
held to the operator's DECODE_ALLOW_CIDRS_MAX before any sandbox: a result's own decode.yml is the agent's
writing, so it never chooses the setup, network or image of the check that judges it (such a result is
marked, `changes_decode_yml`). A check that passes on the base makes the task `invalid`: the model is never
asked. A run that commits nothing is `unresolved` without a second check (its result is the base).
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bot.config import RunParts
from bot.core.errors import DecodeError
from bot.core.names import CLI_ORIGIN, run_branch, run_tag
from bot.core.trees import remove_tree
from bot.eval.tasks import Task
from bot.run.beside import Beside
from bot.run.attempts import run_attempts
from bot.run.pipeline import Job, Ran, execute
from bot.run.repo_config import PATH as CONFIG_PATH, RepoConfig, load_repo_config
from bot.run.result import Figures
from bot.run.setup import run_setup
from bot.run.transcript import Transcript
from bot.sandbox import CommandResult, open_sandbox, sandbox_spec
from bot.sandbox.egress_policy import EgressPolicy, check_ceiling
from bot.workspace.clone import prepare
from bot.workspace.mirror import Mirrors

CHECK_TIMEOUT_S = 900.0  # one check command, after setup
STATUSES = ("resolved", "unresolved", "invalid", "error")

Progress = Callable[[str], None]
# Whether a check's output resolves its task, for checks judged by more than their exit status (SWE-bench's
# per-test statuses, bot/eval/swebench.py); None: exit 0 resolves.
Judge = Callable[[str], bool] | None
# A task's `repo` as the pipeline clones it: (what to clone, the token to clone with). The door supplies it
# (bot/cli/eval.py), as `decode run` resolves --repo.
Resolve = Callable[[str], tuple[str, str | None]]


@dataclass(frozen=True)
class Outcome:
    """How one task ended: one line of results.jsonl (`reason` only for `invalid` and `error`). `figures` are
    its runs' own (bot/run/result.py), every attempt's together; `seconds` is the whole task's, checks included."""

    id: str
    status: str
    figures: Figures = Figures()
    seconds: float = 0.0
    branch: str | None = None
    transcript: str | None = None
    reason: str | None = None
    changes_config: bool = False  # the result changes .github/decode.yml (the check used the base's)
    patch: str = ""  # the result's diff from the base (empty when nothing was committed); not in results.jsonl
    attempts: int = 1  # `--attempts N`: the status is the verify-picked attempt's, turns and cost all of theirs
    pass_at_n: bool = False  # with attempts: whether any attempt resolved the task

    def to_json(self) -> dict[str, object]:
        """The contract's fields, `reason` when there is one, and `changes_decode_yml` when true."""
        data: dict[str, object] = {"id": self.id, "status": self.status, "turns": self.figures.turns,
                                   "cost_usd": round(self.figures.cost_usd, 6), "seconds": round(self.seconds, 1),
                                   "branch": self.branch, "transcript": self.transcript}
        if self.reason:
            data["reason"] = self.reason
        if self.changes_config:
            data["changes_decode_yml"] = True
        if self.attempts > 1:
            data.update(attempts=self.attempts, pass_at_n=self.pass_at_n)
        return data


def run_task(task: Task, parts: RunParts, resolve: Resolve, out: Path, progress: Progress,
             judge: Judge = None, attempts: int = 1) -> Outcome:
    """Run `task` to its outcome, its checks judged by `judge`; any error (a clone, the sandbox, the model) is
    its `error` outcome, never an exception, so the other tasks go on."""
    started = time.monotonic()
    try:
        return _run(task, parts, resolve, out, progress, started, judge, attempts)
    except Exception as e:  # noqa: BLE001 - one task's failure is its outcome, whatever it was
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        progress(f"error: {reason}")
        return Outcome(task.id, "error", seconds=time.monotonic() - started, reason=parts.redactor.redact(reason))


def passes(result: CommandResult, judge: Judge) -> bool:
    """Whether a check that ended with `result` resolves its task: in time, and exit 0 or `judge`'s verdict."""
    if result.timed_out:
        return False
    return judge(result.output) if judge is not None else result.exit_code == 0


def _run(task: Task, parts: RunParts, resolve: Resolve, out: Path, progress: Progress,
         started: float, judge: Judge, attempts: int) -> Outcome:
    source, token = resolve(task.repo)
    logs = out / "checks" / slug(task.id)
    progress(f"checking the base {task.base}")
    before, config = run_check(task.check, parts, source, task.base, token, logs / "base")
    if passes(before, judge):
        return Outcome(task.id, "invalid", seconds=time.monotonic() - started,
                       reason=f"the check passes on the base {task.base} (see {logs / 'base'})")
    if before.exit_code in (126, 127, 97):  # the shell's "cannot execute" and "not found": the check itself is broken
        why = "its test patch does not apply" if before.exit_code == 97 else \
            "a command is missing or not executable in the sandbox"  # 97: bot/eval/swebench.py's check
        raise DecodeError(f"the check cannot run on the base {task.base} (exit {before.exit_code}: {why}; "
                          f"see {logs / 'base'})")
    run_id = Job.new_run_id()
    job = Job(repo=source, task=task.task, branch=run_branch(run_tag(CLI_ORIGIN, run_id)), run_id=run_id,
              base=task.base, token=token)
    if attempts == 1:
        ran = execute(job, parts, progress=progress)
        rans, shown = [ran], ran
    else:  # what the bot would publish: the picked attempt, else (none passed verify) the first that finished
        chosen, _, found = run_attempts(job, attempts, progress, parts=parts)
        rans = [r for r in found if r is not None]
        if not rans:
            raise DecodeError(f"none of the {attempts} attempts finished (see {out})")
        shown = chosen or rans[0]
    verdicts = [_verdict(task, parts, r, config, logs / ("result" if attempts == 1 else f"result-{n}"), judge,
                         progress) for n, r in enumerate(rans, 1)]
    status, reason = verdicts[rans.index(shown)]
    result = shown.result
    return Outcome(task.id, status, figures=sum(filter(None, (r.result.figures for r in rans)), Figures()),
                   seconds=time.monotonic() - started, branch=job.branch if result.commit else None,
                   transcript=str(shown.transcript_md), reason=reason, changes_config=CONFIG_PATH in result.changed,
                   patch=_diff(shown.workspace.clean, shown.workspace.base_sha, job.branch)
                   if result.commit and shown.workspace else "",
                   attempts=attempts, pass_at_n=any(v[0] == "resolved" for v in verdicts))


def _verdict(task: Task, parts: RunParts, ran: Ran, config: RepoConfig, log_dir: Path, judge: Judge,
             progress: Progress) -> tuple[str, str | None]:
    """One run's status and reason: its result checked (a run that committed nothing is unresolved; one
    that ended in an error and resolved nothing is an error)."""
    result = ran.result
    if result.commit is not None and ran.workspace is not None:
        progress("checking the result")
        after, _ = run_check(task.check, parts, str(ran.workspace.clean), ran.job.branch, None, log_dir,
                             config=config)
        if passes(after, judge):
            return "resolved", None
    if result.state == "failed":
        return "error", result.error or "the run ended in an error"
    return "unresolved", None


def _diff(clean: Path, base: str, branch: str) -> str:
    """The run's result as a patch `git apply` takes: `branch`'s diff from `base`, binary files included."""
    done = subprocess.run(["git", "diff", "--binary", base, branch], cwd=clean, capture_output=True, text=True,
                          check=True)
    return done.stdout


def run_check(command: str, parts: RunParts, source: str, ref: str, token: str | None, log_dir: Path, *,
              config: RepoConfig | None = None) -> tuple[CommandResult, RepoConfig]:
    """`command` in a fresh sandbox on `source` at `ref`, after `config`'s setup there (default: the
    decode.yml of `ref`, the task's base), and that config; its transcript (setup and check output) goes to
    `log_dir`. A setup that fails, or an allow_cidrs past DECODE_ALLOW_CIDRS_MAX, is a `DecodeError`. Having
    taken the repository's kept tree, if any, it keeps the next one beside the check, for the next task's run."""
    redactor = parts.redactor.plus(token)
    transcript = Transcript(log_dir, redactor)
    work = Path(tempfile.mkdtemp(prefix="eval-check-", dir=_scratch(parts)))
    beside = Beside()
    try:
        ws = prepare(source, work, "decode-eval-check", ref, token, redactor=redactor,
                     mirrors=Mirrors.of(parts.store))
        beside.now(ws.keep_tree, "decode-keep-tree")
        config = config or load_repo_config(ws.git, ws.base_sha)
        check_ceiling(config.allow_cidrs, parts.sandbox.allow_cidrs_max)
        policy = EgressPolicy(internet=config.network, allow_cidrs=config.allow_cidrs,
                              allow_domains=config.allow_domains)
        spec = sandbox_spec(parts.sandbox, ws.path, image=config.image or parts.sandbox.image,
                            name=f"decode-check-{work.name.removeprefix('eval-check-').lower()}", gpu=config.gpu,
                            pool_size=0)
        setup_policy = EgressPolicy(internet=True, allow_cidrs=config.allow_cidrs)
        sandbox = open_sandbox(parts.sandbox.mode, spec, network=setup_policy if config.setup else policy)
        try:
            run_setup(sandbox, config, transcript, lambda line: None, redactor.redact)
            if config.setup:
                sandbox.set_network(policy)
            result = sandbox.run(command, timeout=CHECK_TIMEOUT_S)
        finally:
            sandbox.close()
        transcript.record("check", command=command, ref=ref, commit=ws.base_sha, exit_code=result.exit_code,
                          timed_out=result.timed_out, output=redactor.redact(result.output)[-20_000:])
        return result, config
    except DecodeError as e:
        transcript.record("check", command=command, ref=ref, error=str(e))
        raise DecodeError(f"the check could not run on {ref}: {e}") from None
    finally:
        transcript.close()
        transcript.write_markdown()
        remove_tree(work)
        beside.join()


def _scratch(parts: RunParts) -> Path:
    """Where check clones are made (under the data dir, like the runs' own)."""
    path = parts.store.data_dir / "eval-checks"
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def slug(task_id: str) -> str:
    """`task_id` as a file name (an id that needed changing gets a short digest of itself, so two stay two)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", task_id).lstrip(".")
    return safe if safe == task_id else f"{safe or 'task'}-{hashlib.sha256(task_id.encode()).hexdigest()[:8]}"
