"""One run, start to end: workspace -> sandbox -> setup -> agent -> hand-back.

Everything here happens on the host except the tool calls, which go to the
sandbox. The sandbox gets a copy of the repository; its changes come back as a
patch that is applied to a clean clone it never saw, and committed there.
Publishing (push, PR, comments) is the caller's business.
"""

from __future__ import annotations

import re
import subprocess
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bot.agent.loop import AgentResult, run_agent
from bot.agent.prompt import RepoFacts, network_rule, system_prompt, task_message
from bot.config import Settings
from bot.errors import DecodeError
from bot.model import Model, make_model
from bot.redact import Redactor
from bot.repo_config import RepoConfig, load_repo_config
from bot.sandbox import Sandbox, SandboxSpec, open_sandbox
from bot.sandbox.egress_policy import EgressPolicy
from bot.transcript import Transcript
from bot.workspace import Workspace, prepare

Progress = Callable[[str], None]


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
    left_out: list[str] = field(default_factory=list)  # workflow files the repository does not let us commit
    blocked: dict[str, int] = field(default_factory=dict)  # "host:port" -> attempts the agent's egress policy blocked


def issue_branch(number: int, title: str) -> str:
    """`decode/issue-<N>-<slug>`, the contract's branch for an issue."""
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:40].rstrip("-") or "task"
    return f"decode/issue-{number}-{slug}"


def execute(job: Job, settings: Settings, *, model: Model | None = None, progress: Progress = print) -> Outcome:
    """Run `job` to the end and return its outcome; a `DecodeError` when it cannot run."""
    run_dir = fresh_dir(settings.data_dir / "runs", job.run_id if job.attempt == 1 else f"{job.run_id}.{job.attempt}")
    redactor = Redactor(settings.secrets())
    transcript = Transcript(run_dir, redactor)
    result = AgentResult("error", "", error="the run did not start")
    outcome = Outcome(job, result, run_dir, transcript.path, transcript.md_path)
    try:
        model = model or make_model(settings)
        progress(f"preparing {job.repo} on branch {job.branch}")
        ws = prepare(job.repo, run_dir, job.branch, job.base, settings.github_token, redactor=redactor)
        outcome.workspace = ws
        config_sha = ws.base_sha if job.config_base is None else ws.branch_commit(job.config_base)
        config = load_repo_config(ws.git, config_sha)
        transcript.record("run_start", task=job.task, repo=job.repo, branch=job.branch, base_sha=ws.base_sha,
                          config_sha=config_sha, model=model.name, sandbox=settings.sandbox_mode,
                          budget=vars(settings.budget))
        if config.gpu and settings.sandbox_mode != "modal":
            note = (f".github/decode.yml asks for a GPU, which only SANDBOX_MODE=modal provides; the "
                    f"{settings.sandbox_mode} sandbox runs without it")
            transcript.record("note", text=note)
            progress(note)
        progress(f"starting the {settings.sandbox_mode} sandbox")
        spec = SandboxSpec(workspace=ws.path, image=settings.sandbox_image, name=f"decode-{job.run_id}",
                           hide=(settings.data_dir, *settings.sandbox_hide), path=settings.sandbox_path,
                           gpu=config.gpu)
        setup_policy = EgressPolicy(internet=bool(config.setup), allow_cidrs=config.allow_cidrs)
        agent_policy = EgressPolicy(internet=config.network, allow_cidrs=config.allow_cidrs,
                                    allow_domains=config.allow_domains)
        sandbox = open_sandbox(settings.sandbox_mode, spec, network=setup_policy)
        try:
            run_setup(sandbox, config, transcript, progress)
            sandbox.set_network(agent_policy)  # restarts agentd: nothing setup started survives
            facts = repo_facts(ws, sandbox.root, job.branch)
            network = network_rule(internet=config.network, allow_domains=config.allow_domains,
                                   allow_cidrs=config.allow_cidrs)
            result = run_agent(
                model=model, sandbox=sandbox, system=system_prompt(facts, network=network),
                task=task_message(job.task), budget=settings.budget, recorder=transcript,
                prices=dict(settings.prices), progress=progress, redact=redactor.redact,
            )
            outcome.blocked = sandbox.blocked()
            if outcome.blocked:
                transcript.record("egress_blocked", destinations=outcome.blocked)
            outcome.result = result
            patch = sandbox.export_patch(ws.base_sha)
        finally:
            sandbox.close()
        applied = ws.apply_patch(patch, keep_workflows=config.allow_workflow_changes)
        outcome.changed, outcome.left_out = applied.changed, applied.left_out
        if applied.left_out:
            transcript.record("note", text="left out of the commit (workflow files; allow_workflow_changes is "
                                           "not set in .github/decode.yml): " + ", ".join(applied.left_out))
        outcome.commit = ws.commit(commit_message(job, result), job.co_author)
        return outcome
    except DecodeError as e:
        transcript.record("run_end", stop_reason="error", summary="", error=str(e))
        raise
    finally:
        transcript.close()
        transcript.write_markdown()


def fresh_dir(parent: Path, name: str) -> Path:
    """`parent/name`, or `name-2`, `name-3`... when an earlier run (a re-run workflow, a retry) left it."""
    candidate, n = parent / name, 1
    while candidate.exists():
        n += 1
        candidate = parent / f"{name}-{n}"
    return candidate


def run_setup(sandbox: Sandbox, config: RepoConfig, transcript: Transcript, progress: Progress) -> None:
    """Run the repository's setup commands, with network; the first failure stops the run."""
    for command in config.setup:
        progress(f"setup: {command}")
        result = sandbox.run(command, timeout=config.setup_timeout)
        transcript.record("setup", command=command, exit_code=result.exit_code, output=result.output[-20_000:],
                          timed_out=result.timed_out, duration_s=result.duration_s)
        if result.timed_out or result.exit_code != 0:
            status = "timed out" if result.timed_out else f"exited with {result.exit_code}"
            tail = result.output.strip().splitlines()[-5:]
            raise DecodeError(f"setup command {command!r} from .github/decode.yml {status}: " + " | ".join(tail))


def repo_facts(ws: Workspace, root: str, branch: str) -> RepoFacts:
    """Facts for the system prompt, read from the host's clean clone."""
    entries = sorted(p.name + ("/" if p.is_dir() else "") for p in ws.clean.iterdir() if p.name != ".git")
    last = subprocess.run(
        ["git", "-c", "core.fsmonitor=false", "log", "-1", "--format=%h %s"],
        cwd=ws.clean, capture_output=True, text=True,
    ).stdout.strip()
    return RepoFacts(root=root, branch=branch, top_level="\n".join(f"  {e}" for e in entries[:200]), last_commit=last)


def commit_message(job: Job, result: AgentResult) -> str:
    """First line from the title or task, the summary as the body."""
    subject = (job.title or job.task).strip().splitlines()[0] if (job.title or job.task).strip() else "changes"
    subject = subject if len(subject) <= 64 else subject[:61] + "..."
    prefix = "decode" if result.completed else f"decode (incomplete: {result.stop_reason})"
    return f"{prefix}: {subject}\n\n{result.summary.strip()[:4000]}\n"
