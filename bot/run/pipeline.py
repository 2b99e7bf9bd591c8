"""One run, start to end: workspace -> sandbox -> setup -> agent -> hand-back.

Everything here happens on the host except the tool calls, which go to the
sandbox. The sandbox gets a copy of the repository; its changes come back as a
patch that is applied to a clean clone it never saw, and committed there.
Publishing (push, PR, comments) is the caller's business.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bot.agent.loop import AgentResult, run_agent
from bot.agent.prompt import RepoFacts, network_rule, system_prompt, task_message
from bot.config import Settings
from bot.core.errors import DecodeError, Interrupted
from bot.run.instructions import load_instructions
from bot.model import Model, make_model
from bot.run.repo_config import RepoConfig, load_repo_config
from bot.workspace.run_dirs import drop_clones, fresh_dir, prune, write_record
from bot.sandbox import BACKENDS, Sandbox, SandboxSpec, capabilities, offering
from bot.sandbox.client import AgentdSandbox
from bot.sandbox.egress_policy import EgressPolicy
from bot.run.setup_cache import RunCache, SetupCache
from bot.run.task_text import one_line
from bot.run.transcript import Transcript, safe_commit_text
from bot.run.verify import Verification, Verifier, finish_gate
from bot.workspace.clone import Workspace, prepare
from bot.sandbox import sandbox_spec

Progress = Callable[[str], None]
MB = 1024 * 1024
PATCH_CAP_FILES = 4  # a hand-back may carry at most this many times DECODE_MAX_FILE_MB


@dataclass(frozen=True)
class Job:
    """What to do: a task on a repository, landing on `branch`."""

    repo: str
    task: str
    branch: str
    run_id: str
    base: str | None = None
    co_author: str | None = None
    title: str | None = None
    config_base: str | None = None  # the branch whose .github/decode.yml applies; default: `base` itself
    attempt: int = 1  # a retried job (its worker died) runs again in a fresh run directory
    token: str | None = None  # what the clone authenticates with (an installation token is per repository)

    @staticmethod
    def new_run_id() -> str:
        return uuid.uuid4().hex[:10]


@dataclass
class Outcome:
    """What a run produced on the host."""

    job: Job
    result: AgentResult
    run_dir: Path
    transcript_jsonl: Path
    transcript_md: Path
    workspace: Workspace | None = None
    commit: str | None = None
    changed: list[str] = field(default_factory=list)
    left_out: dict[str, str] = field(default_factory=dict)  # path -> why it was left out of the commit
    blocked: dict[str, int] = field(default_factory=dict)  # "host:port" -> attempts the agent's egress policy blocked
    verification: Verification = field(default_factory=Verification)  # decode.yml's `verify:` (bot.run.verify)


def issue_branch(number: int, title: str) -> str:
    """`decode/issue-<N>-<slug>`, the contract's branch for an issue."""
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:40].rstrip("-") or "task"
    return f"decode/issue-{number}-{slug}"


def execute(job: Job, settings: Settings, *, model: Model | None = None, progress: Progress = print,
            watch: Callable[[dict[str, Any]], None] | None = None) -> Outcome:
    """Run `job` to the end and return its outcome; a `DecodeError` when it cannot run.

    `watch` sees every transcript event as it is recorded, `phase` events among them (preparing, sandbox,
    setup, agent, verifying): the live tracking comment follows the run through it."""
    started = time.monotonic()  # the wall-clock cap counts from here: setup included
    prune(settings.store.data_dir / "runs", settings.store.keep_days)
    run_dir = fresh_dir(settings.store.data_dir / "runs", job.run_id if job.attempt == 1 else f"{job.run_id}.{job.attempt}")
    redactor = settings.redactor.plus(job.token)
    transcript = Transcript(run_dir, redactor, watch)
    result = AgentResult("error", "", error="the run did not start")
    outcome = Outcome(job, result, run_dir, transcript.path, transcript.md_path)
    try:
        model = model or make_model(settings.model)
        progress(f"checking the model {model.name}")
        model.check()  # a rejected key or unknown model id ends the run here, before any clone
        transcript.record("phase", name="preparing")
        progress(f"preparing {job.repo} on branch {job.branch}")
        ws = prepare(job.repo, run_dir, job.branch, job.base, job.token, redactor=redactor)
        outcome.workspace = ws
        config_sha = ws.base_sha if job.config_base is None else ws.branch_commit(job.config_base)
        config = load_repo_config(ws.git, config_sha)
        transcript.record("run_start", task=job.task, repo=job.repo, branch=job.branch, base_sha=ws.base_sha,
                          config_sha=config_sha, model=model.name, sandbox=settings.sandbox.mode,
                          budget=vars(settings.budget))
        instructions = load_instructions(ws.git, config_sha)  # the same commit as decode.yml: never a PR head
        if instructions.parts or instructions.notes:
            transcript.record("instructions", files=list(instructions.used), notes=list(instructions.notes))
        for note in ws.notes:  # e.g. a submodule the host could not fetch
            transcript.record("note", text=note)
            progress(note)
        offers = capabilities(settings.sandbox.mode)
        if config.gpu and not offers.gpu:
            note = (f".github/decode.yml asks for a GPU, which only SANDBOX_MODE={' and '.join(offering('gpu'))} "
                    f"provides; the {settings.sandbox.mode} sandbox runs without it")
            transcript.record("note", text=note)
            progress(note)
        if config.image and not offers.image:
            note = (f".github/decode.yml names the image {config.image}, which only SANDBOX_MODE="
                    f"{' and '.join(offering('image'))} use; the {settings.sandbox.mode} sandbox runs on the host's "
                    "toolchain")
            transcript.record("note", text=note)
            progress(note)
        transcript.record("phase", name="sandbox")
        progress(f"starting the {settings.sandbox.mode} sandbox")
        spec = sandbox_spec(settings.sandbox, ws.path, image=config.image or settings.sandbox.image,
                                     name=f"decode-{job.run_id}", gpu=config.gpu)
        setup_policy = EgressPolicy(internet=bool(config.setup), allow_cidrs=config.allow_cidrs)
        agent_policy = EgressPolicy(internet=config.network, allow_cidrs=config.allow_cidrs,
                                    allow_domains=config.allow_domains)
        max_file = settings.sandbox.max_file_mb * MB
        cache = plan_setup_cache(settings, spec, config, ws, config_sha, redactor.redact(job.repo), transcript)
        hit = cache.hit if cache is not None else None
        if hit is not None:
            spec = replace(spec, image=hit.tag)
        runs_setup = bool(config.setup) and hit is None
        launcher = BACKENDS[settings.sandbox.mode](spec)
        # Without setup to run, agentd starts under the agent's policy: no restart, and a warm agentd is kept.
        sandbox = AgentdSandbox(launcher, mode=settings.sandbox.mode,
                                network=setup_policy if runs_setup else agent_policy)
        if getattr(launcher, "acquired_from", "") == "pool":  # docker and modal with DECODE_POOL_SIZE
            transcript.record("note", text=f"the {settings.sandbox.mode} sandbox came from the warm pool")
        try:
            deadline = started + settings.budget.max_wall_s
            if cache is not None and hit is not None:
                cache.restore(launcher)  # type: ignore[arg-type]  # only setup_cache launchers get a RunCache
                transcript.record("setup_cache", result="hit", key=cache.key[:12], repo=hit.repo,
                                  created=hit.created)
                progress(f"setup: skipped, the setup cache has it (key {cache.key[:12]})")
            elif runs_setup:
                run_setup(sandbox, config, transcript, progress, redactor.redact, deadline=deadline)
                sandbox.set_network(agent_policy)  # restarts agentd: nothing setup started survives
            if cache is not None and hit is None:
                saved = cache.save(launcher)  # type: ignore[arg-type]
                transcript.record("setup_cache", result="miss", key=cache.key[:12], saved=saved)
                progress(f"setup cache {cache.key[:12]}: {saved}")
            transcript.record("phase", name="agent")
            facts = repo_facts(ws, job.branch)
            network = network_rule(internet=config.network, allow_domains=config.allow_domains,
                                   allow_cidrs=config.allow_cidrs)
            verifier = Verifier(sandbox, config, transcript, progress, redactor.redact, deadline)
            outcome.verification = verifier.verification
            result = run_agent(
                model=model, sandbox=sandbox,
                system=system_prompt(root=sandbox.root, network=network, instructions=instructions.parts),
                task=task_message(job.task, facts), budget=settings.budget, recorder=transcript,
                prices=dict(settings.model.prices), progress=progress, redact=redactor.redact, started=started,
                before_finish=finish_gate(lambda: review_hand_back(sandbox, ws.base_sha, max_file, transcript),
                                          verifier),
            )
            outcome.blocked = sandbox.blocked()
            if outcome.blocked:
                transcript.record("egress_blocked", destinations=outcome.blocked)
            outcome.result = result
            if result.stop_reason == "interrupted":
                progress("interrupted: keeping the work so far (interrupt again to stop without it)")
                sandbox.set_network(agent_policy)  # a fresh agentd: the abandoned call's answer is not awaited
            hand = sandbox.hand_back(ws.base_sha, max_file_bytes=max_file, max_bytes=max_file * PATCH_CAP_FILES)
        finally:
            sandbox.close()
        applied = ws.apply_patch(hand.patch, keep_workflows=config.allow_workflow_changes, max_file_bytes=max_file)
        outcome.changed, outcome.left_out = applied.changed, {**hand.left_out, **applied.left_out}
        del hand  # the patch can be large
        if outcome.left_out:
            transcript.record("note", text="left out of the commit: " + "; ".join(
                f"{path} ({why})" for path, why in sorted(outcome.left_out.items())))
        outcome.commit = ws.commit(commit_message(job, result, redactor.redact), job.co_author)
        return outcome
    except DecodeError as e:
        transcript.record("run_end", stop_reason="error", summary="", error=str(e))
        raise
    except KeyboardInterrupt:  # before the agent ran, or a second interrupt while its work was being kept
        transcript.record("run_end", stop_reason="interrupted", summary="", error="interrupted")
        raise Interrupted(f"interrupted: nothing was committed; the transcript is {transcript.md_path}") from None
    finally:
        if outcome.commit is None:  # nothing to publish
            drop_clones(run_dir)
        elif outcome.workspace is not None:  # the sandbox's copy; the clean clone stays for publishing
            shutil.rmtree(outcome.workspace.path, ignore_errors=True)
        transcript.close()
        transcript.write_markdown()
        r = outcome.result
        write_record(run_dir, run_id=job.run_id, attempt=job.attempt, repo=redactor.redact(job.repo),
                     branch=job.branch, commit=outcome.commit, stop_reason=r.stop_reason, error=r.error,
                     turns=r.turns, cost_usd=r.cost_usd, wall_s=r.wall_s, changed=outcome.changed,
                     left_out=outcome.left_out, verified=outcome.verification.verified)


def review_hand_back(sandbox: Sandbox, base: str, max_file: int, transcript: Transcript) -> str | None:
    """The one extra turn before the agent's answer is accepted: what the hand-back would leave out, named,
    with how to fix it; None when nothing would be (or the sandbox cannot tell)."""
    try:
        found = sandbox.check_hand_back(base, max_file_bytes=max_file)
    except DecodeError as e:
        transcript.record("note", text=f"the hand-back could not be checked before the answer: {e}")
        return None
    if not found:
        return None
    entries = sorted(found.items())[:50]
    listed = "\n".join(f"- {path}: {why}" for path, why in entries)
    transcript.record("note", text="before the answer, the agent was told these entries would be left out: "
                                   + "; ".join(f"{path} ({why})" for path, why in entries))
    return ("Before your answer is accepted: these entries in the workspace would be left out of the commit, "
            f"and the rest committed without them:\n{listed}\n\nFix them if they are part of your change: make "
            "symlinks point to files inside the repository (or use a copy), keep files under the size limit, "
            "and leave .git and nested repositories alone; delete what is not needed. This is your only "
            "chance to change them. Then answer again with your summary.")


def plan_setup_cache(settings: Settings, spec: SandboxSpec, config: RepoConfig, ws: Workspace, config_sha: str,
                     repo: str, transcript: Transcript) -> RunCache | None:
    """The run's setup cache (bot/run/setup_cache.py), after pruning old entries; None without one. A run may fill
    the cache only when its workspace is the commit decode.yml and the key files were read from."""
    if not capabilities(settings.sandbox.mode).setup_cache:
        return None
    cache = SetupCache(settings.store.data_dir / "setup-cache")
    cap = settings.sandbox.setup_cache_mb * MB
    cache.prune(settings.store.keep_days, cap)
    run = RunCache.plan(cache, mode=settings.sandbox.mode, spec=spec, repo=repo, setup=config.setup,
                        key_paths=config.setup_cache_key, git=ws.git, commit=config_sha,
                        may_save=ws.base_sha == config_sha, cap_bytes=cap)
    if run is not None and run.refused:
        transcript.record("setup_cache", result="refused", key=run.key[:12], reason=run.refused)
    return run


def run_setup(sandbox: Sandbox, config: RepoConfig, transcript: Transcript, progress: Progress,
              redact: Callable[[str], str] = lambda text: text, *, deadline: float = float("inf")) -> None:
    """Run the repository's setup commands, with network; the first failure stops the run.

    The output is redacted whole before its tail is kept, so no secret is cut in two. Each command gets
    `setup_timeout`, clamped by what is left before `deadline` (the run's wall clock, `time.monotonic()`).
    """
    if config.setup:
        transcript.record("phase", name="setup")
    for command in config.setup:
        left = deadline - time.monotonic()
        if left < 1:
            raise DecodeError(f"setup command {command!r} from .github/decode.yml was not started: the run's "
                              f"time limit (DECODE_TIMEOUT_MINUTES) is used up")
        progress(f"setup: {command}")
        timeout = min(config.setup_timeout, left)
        result = sandbox.run(command, timeout=timeout)
        transcript.record("setup", command=command, exit_code=result.exit_code, output=redact(result.output)[-20_000:],
                          timed_out=result.timed_out, duration_s=result.duration_s)
        if result.timed_out or result.exit_code != 0:
            status = f"exited with {result.exit_code}"
            if result.timed_out:
                status = (f"timed out after setup_timeout={config.setup_timeout:g}s" if timeout >= config.setup_timeout
                          else "was stopped at the run's time limit (DECODE_TIMEOUT_MINUTES)")
            tail = result.output.strip().splitlines()[-5:]
            raise DecodeError(f"setup command {command!r} from .github/decode.yml {status}: " + " | ".join(tail))


def repo_facts(ws: Workspace, branch: str) -> RepoFacts:
    """Facts for the task message, read from the host's clean clone and cleaned like user text (a fork's
    author chooses the file names, the commit subject and the branch name)."""
    entries = sorted(one_line(p.name) + ("/" if p.is_dir() else "") for p in ws.clean.iterdir() if p.name != ".git")
    last = subprocess.run(
        ["git", "-c", "core.fsmonitor=false", "log", "-1", "--format=%h %s"],
        cwd=ws.clean, capture_output=True, text=True,
    ).stdout.strip()
    return RepoFacts(branch=one_line(branch), top_level="\n".join(f"  {e}" for e in entries[:200]),
                     last_commit=one_line(last))


def commit_message(job: Job, result: AgentResult, redact: Callable[[str], str] = lambda text: text) -> str:
    """First line from the title or task, the summary (redacted, then capped) as the body; both made safe for
    a commit message (`safe_commit_text`): an issue's author or a steered model cannot close issues, ping
    people or add trailers such as Co-authored-by through it."""
    first = (job.title or job.task).strip().splitlines()[0] if (job.title or job.task).strip() else ""
    subject = safe_commit_text(one_line(first), subject=True).strip() or "changes"
    subject = subject if len(subject) <= 64 else subject[:61] + "..."
    prefix = "decode" if result.completed else \
        f"decode ({'failed' if result.failed else 'incomplete'}: {result.stop_reason})"
    body = safe_commit_text(redact(result.summary)).strip()[:4000]
    return f"{prefix}: {subject}\n\n{body}\n"
