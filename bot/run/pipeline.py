"""One run, start to end: workspace -> sandbox -> setup -> agent -> hand-back.

Everything here happens on the host except the tool calls, which go to the
sandbox. The sandbox gets a copy of the repository; its changes come back as a
patch that is applied to a clean clone it never saw, and committed there.
Publishing (push, PR, comments) is the caller's business.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bot.agent.loop import AgentResult, answer_room, run_agent
from bot.agent.mcp import McpServers
from bot.agent.prompt import network_rule, system_prompt, task_message
from bot.agent.purse import Purse
from bot.agent.tools import DEFAULT_TOOLS, Toolset
from bot.config import Budget, McpSettings, ModelSettings, RunParts, SandboxSettings, StoreSettings
from bot.core.errors import DecodeError, Interrupted
from bot.core.names import attempt_dir
from bot.core.redact import Redactor
from bot.core.text import one_line
from bot.core.trees import remove_tree
from bot.model import Model, ModelInfo, make_model, preload
from bot.model.thinking import ThinkingPlan, plan_thinking
from bot.run.beside import Beside
from bot.run.instructions import Instructions, load_instructions
from bot.run.messages import commit_message, repo_facts, review_hand_back
from bot.run.repo_config import RepoConfig, load_repo_config
from bot.run.restart import Restarting
from bot.run.self_review import Outcome, SelfReview, with_review
from bot.run.result import Figures, RunResult, state_of, write_record
from bot.run.setup import plan_setup_cache, run_setup
from bot.run.setup_cache import RunCache
from bot.run.transcript import JSONL_NAME, MD_NAME, Transcript
from bot.run.verify import Verification, Verifier, finish_gate
from bot.sandbox import HandBack, SandboxSpec, capabilities, offering, open_sandbox, sandbox_spec
from bot.sandbox.client import AgentdSandbox
from bot.sandbox.egress_policy import EgressPolicy, check_ceiling
from bot.workspace.clone import Workspace, prepare
from bot.workspace.mirror import Mirrors
from bot.workspace.run_dirs import drop_clones, fresh_dir, prune

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
    tools: Toolset = field(default=DEFAULT_TOOLS, compare=False)  # what the model is offered; read-only: no hand-back
    purse: Purse | None = field(default=None, compare=False)  # the cost cap it shares (a best-of-N run's attempts)

    @staticmethod
    def new_run_id() -> str:
        return uuid.uuid4().hex[:10]


@dataclass(frozen=True)
class Ran:
    """A finished run on the host: its `RunResult`, the agent's answer and checks, and what publishing needs
    (the workspace whose clean clone holds the commit, the run directory with the transcript)."""

    job: Job
    result: RunResult
    agent: AgentResult
    verification: Verification  # decode.yml's `verify:` (bot.run.verify), with each check's output
    run_dir: Path
    workspace: Workspace | None = None
    review: Outcome | None = None  # decode.yml's `review: true` (bot.run.self_review)

    @property
    def transcript_jsonl(self) -> Path:
        return self.run_dir / JSONL_NAME

    @property
    def transcript_md(self) -> Path:
        return self.run_dir / MD_NAME


@dataclass(frozen=True)
class _Context:
    """What every step of one run reads: the job, the parts of the settings it runs with, and its own things."""

    job: Job
    model: ModelSettings
    sandbox: SandboxSettings
    mcp: McpSettings
    store: StoreSettings
    budget: Budget
    run_dir: Path
    transcript: Transcript
    progress: Progress
    redactor: Redactor
    started: float  # time.monotonic() at the start: the wall-clock cap counts setup too
    beside: Beside  # earlier runs' directories being deleted, the next run's kept tree made; joined at close

    @property
    def deadline(self) -> float:
        return self.started + self.budget.max_wall_s


@dataclass(frozen=True)
class _Work:
    """What the sandbox phase gives the commit: the agent's result, its checks, what egress refused, the
    hand-back, and why the sandbox was restarted, once per restart."""

    agent: AgentResult
    verification: Verification
    blocked: dict[str, int]
    hand: HandBack
    restarts: tuple[str, ...]
    review: Outcome | None = None


@dataclass(frozen=True)
class _Repo:
    """The prepared workspace and what the base commit says about the run."""

    ws: Workspace
    config: RepoConfig
    config_sha: str
    instructions: Instructions
    info: ModelInfo  # the model's figures, asked once per run
    thinking: ThinkingPlan


def execute(job: Job, parts: RunParts, *, client: Model | None = None, progress: Progress = print,
            watch: Callable[[dict[str, Any]], None] | None = None) -> Ran:
    """Run `job` to the end and return what it produced; a `DecodeError` when it cannot run.

    It takes the parts of the settings a run reads (`Settings.run`), the process's redactor among them; `client`
    is a model already made (None: one is made from `parts.model`).

    `watch` sees every transcript event as it is recorded, `phase` events among them (preparing, sandbox,
    setup, agent, verifying): the live tracking comment follows the run through it. record.json gets the
    run's `RunResult` however the run ends. Earlier runs' directories are pruned on a thread beside the run,
    never before its first model request."""
    started = time.monotonic()
    model, sandbox, mcp, store, budget = parts.model, parts.sandbox, parts.mcp, parts.store, parts.budget
    if client is None:
        preload(model)
    runs = store.data_dir / "runs"
    beside = Beside()
    beside.now(lambda: prune(runs, store.keep_days), "decode-prune")
    run_dir = fresh_dir(runs, attempt_dir(job.run_id, job.attempt))
    redactor = parts.redactor.plus(job.token)

    def seen(event: dict[str, Any]) -> None:
        beside.seen(event)
        if watch is not None:
            watch(event)

    ctx = _Context(job, model, sandbox, mcp, store, budget, run_dir, Transcript(run_dir, redactor, seen), progress,
                   redactor, started, beside)
    repo: _Repo | None = None
    ran: Ran | None = None
    try:
        checked = check_model(ctx, client)
        repo = prepare_repo(ctx, checked)
        note_unoffered(ctx, repo.config)
        ran = commit_work(ctx, repo, work_in_sandbox(ctx, repo, checked))
        return ran
    except DecodeError as e:
        ctx.transcript.record("run_end", stop_reason="error", summary="", error=str(e))
        raise
    except KeyboardInterrupt:  # before the agent ran, or a second interrupt while its work was being kept
        ctx.transcript.record("run_end", stop_reason="interrupted", summary="", error="interrupted")
        raise Interrupted(f"interrupted: nothing was committed; the transcript is {ctx.transcript.md_path}") from None
    finally:
        close_run(ctx, repo.ws if repo is not None else None, ran)


def check_model(ctx: _Context, model: Model | None) -> Model:
    """The run's model, asked once: a rejected key or unknown model id ends the run here, before any clone."""
    model = model or make_model(ctx.model)
    ctx.progress(f"checking the model {model.name}")
    model.check()
    return model


def prepare_repo(ctx: _Context, model: Model) -> _Repo:
    """Clone the repository onto the run's branch, the sandbox's copy checked out on a thread until the sandbox
    needs it (`Workspace.ready`), and read what its base says about the run (`read_repo`)."""
    job, transcript = ctx.job, ctx.transcript
    transcript.record("phase", name="preparing")
    ctx.progress(f"preparing {job.repo} on branch {job.branch}")
    ws = prepare(job.repo, ctx.run_dir, job.branch, job.base, job.token, redactor=ctx.redactor,
                 mirrors=Mirrors.of(ctx.store), background=True,  # checked out while the sandbox starts
                 say=lambda line: transcript.record("note", text=line))  # a kept tree taken, or why not
    try:
        return read_repo(ctx, model, ws)
    except BaseException:
        with suppress(Exception):  # its error, if any, is not the run's: the copy is deleted next
            ws.ready()
        raise


def read_repo(ctx: _Context, model: Model, ws: Workspace) -> _Repo:
    """decode.yml, the thinking plan and the instructions, from the commit they apply from (the base, or
    `config_base`; never a pull request's head)."""
    job, transcript = ctx.job, ctx.transcript
    config_sha = ws.base_sha if job.config_base is None else ws.branch_commit(job.config_base)
    config = load_repo_config(ws.git, config_sha)
    check_ceiling(config.allow_cidrs, ctx.sandbox.allow_cidrs_max)
    setting = ctx.model.thinking if config.thinking is None else config.thinking
    info = model.info()
    thinking = plan_thinking(setting, info, answer_room(info))
    transcript.record("run_start", task=job.task, repo=job.repo, branch=job.branch, base_sha=ws.base_sha,
                      config_sha=config_sha, model=model.name, sandbox=ctx.sandbox.mode,
                      budget=vars(ctx.budget), thinking=thinking.label)
    if thinking.note:
        _note(ctx, thinking.note)
    instructions = load_instructions(ws.git, config_sha)
    if instructions.parts or instructions.notes:
        transcript.record("instructions", files=list(instructions.used), notes=list(instructions.notes))
    for note in ws.notes:  # e.g. a submodule the host could not fetch
        _note(ctx, note)
    return _Repo(ws, config, config_sha, instructions, info, thinking)


def note_unoffered(ctx: _Context, config: RepoConfig) -> None:
    """Say so when decode.yml asks for what this sandbox does not offer (a GPU, an image): the run goes on."""
    mode = ctx.sandbox.mode
    offers = capabilities(mode)
    if config.gpu and not offers.gpu:
        _note(ctx, f".github/decode.yml asks for a GPU, which only SANDBOX_MODE={' and '.join(offering('gpu'))} "
                   f"provides; the {mode} sandbox runs without it")
    if config.image and not offers.image:
        _note(ctx, f".github/decode.yml names the image {config.image}, which only SANDBOX_MODE="
                   f"{' and '.join(offering('image'))} use; the {mode} sandbox runs on the host's toolchain")


def work_in_sandbox(ctx: _Context, repo: _Repo, model: Model) -> _Work:
    """Open the sandbox, set it up, run the agent in it and take its changes back as a patch; the sandbox is
    restarted on the kept workspace when it dies (bot/run/restart.py) and closed however this ends."""
    config = repo.config
    agent_policy = EgressPolicy(internet=config.network, allow_cidrs=config.allow_cidrs,
                                allow_domains=config.allow_domains)
    max_file = ctx.sandbox.max_file_mb * MB
    caps = {"max_file_bytes": max_file, "max_bytes": max_file * PATCH_CAP_FILES}
    servers = McpServers(config.mcp, ctx.mcp, ctx.transcript.record,
                         lambda line: ctx.progress(ctx.redactor.redact(line)))  # a server's stderr is in it
    bare = lambda: replace(run_spec(ctx, repo), hand_back_only=True)  # noqa: E731 (opened to hand back only)
    sandbox = Restarting(lambda kept: open_set_up(ctx, repo, agent_policy, servers, kept=kept),
                         lambda: open_sandbox(ctx.sandbox.mode, bare(), network=agent_policy),
                         workspace=repo.ws.path, base_sha=repo.ws.base_sha, caps=caps,
                         max_restarts=ctx.sandbox.max_restarts, record=ctx.transcript.record,
                         progress=ctx.progress)
    try:
        agent, verification, review = run_the_agent(ctx, repo, sandbox, model, ctx.job.tools.plus(servers.tools))
        if blocked := sandbox.blocked():
            ctx.transcript.record("egress_blocked", destinations=blocked)
        if agent.stop_reason == "interrupted":
            ctx.progress("interrupted: keeping the work so far (interrupt again to stop without it)")
            sandbox.set_network(agent_policy)  # a fresh agentd: the abandoned call's answer is not awaited
        elif agent.stop_reason in ("sandbox_lost", "max_disk", "max_memory"):  # why: the caller's last line
            ctx.progress("keeping the work so far")
        hand = sandbox.hand_back(repo.ws.base_sha, **caps) if ctx.job.tools.keeps_changes else HandBack(b"", {})
        return _Work(agent, verification, blocked, hand, tuple(sandbox.restarts), review)
    finally:
        servers.close()
        sandbox.close()


def open_set_up(ctx: _Context, repo: _Repo, agent_policy: EgressPolicy, servers: McpServers, *,
                kept: bool = False) -> AgentdSandbox:
    """A sandbox for the agent: opened (`open_run_sandbox`), set up (`set_up`), its MCP servers started; closed
    when that fails.

    `kept`: a restart on the workspace the agent left, whose files (what setup runs) the agent may have
    changed: setup runs under the agent's own policy and fills no setup cache (bot/run/restart.py); when it
    fails there, the run goes on with what the first setup left in the workspace, and says so."""
    sandbox, cache = open_run_sandbox(ctx, repo, agent_policy, kept=kept)
    try:
        try:
            set_up(ctx, sandbox, cache, repo.config, agent_policy, kept=kept)
        except DecodeError as e:
            if not kept or sandbox.launcher.stopped():
                raise
            _note(ctx, f"setup on the restarted sandbox, under the agent's network policy, did not pass ({e}); "
                       "the run goes on with what the first setup left in the workspace")
        servers.start(sandbox)
    except BaseException:
        sandbox.close()
        raise
    return sandbox


def run_spec(ctx: _Context, repo: _Repo) -> SandboxSpec:
    """The run's sandbox: the settings' with the run's name and decode.yml's image and GPU."""
    return sandbox_spec(ctx.sandbox, repo.ws.path, image=repo.config.image or ctx.sandbox.image,
                        name=f"decode-{ctx.job.run_id}", gpu=repo.config.gpu, ready=repo.ws.ready)


def open_run_sandbox(ctx: _Context, repo: _Repo, agent_policy: EgressPolicy, *,
                     kept: bool = False) -> tuple[AgentdSandbox, RunCache | None]:
    """The run's sandbox, through the one way to open one (`bot.sandbox.open_sandbox`, the warm pool behind
    it), started from the setup cache's image on a hit; with setup to run, under setup's network policy, or
    the agent's on a workspace the agent left (`kept`)."""
    config, ws = repo.config, repo.ws
    ctx.transcript.record("phase", name="sandbox")
    ctx.progress(f"starting the {ctx.sandbox.mode} sandbox")
    spec = run_spec(ctx, repo)
    cache = plan_setup_cache(ctx.sandbox, ctx.store, spec, config, ws, repo.config_sha,
                             ctx.redactor.redact(ctx.job.repo), ctx.transcript)
    if cache is not None and cache.hit is not None:
        spec = replace(spec, image=cache.hit.tag)
    runs_setup = bool(config.setup) and (cache is None or cache.hit is None)
    setup_policy = agent_policy if kept else EgressPolicy(internet=bool(config.setup), allow_cidrs=config.allow_cidrs)
    # Without setup to run, agentd starts under the agent's policy: no restart, and a warm agentd is kept.
    sandbox = open_sandbox(ctx.sandbox.mode, spec, network=setup_policy if runs_setup else agent_policy)
    if sandbox.acquired_from == "pool":  # docker and modal with DECODE_POOL_SIZE
        ctx.transcript.record("note", text=f"the {ctx.sandbox.mode} sandbox came from the warm pool")
    return sandbox, cache


def set_up(ctx: _Context, sandbox: AgentdSandbox, cache: RunCache | None, config: RepoConfig,
           agent_policy: EgressPolicy, *, kept: bool = False) -> None:
    """Restore setup's state from the cache on a hit; else run `setup:` and switch to the agent's network
    policy, then save the state when the run has a cache and the workspace is not one the agent left."""
    if cache is not None and cache.hit is not None:
        cache.restore(sandbox.launcher)
        ctx.transcript.record("setup_cache", result="hit", key=cache.key[:12], repo=cache.hit.repo,
                              created=cache.hit.created)
        ctx.progress(f"setup: skipped, the setup cache has it (key {cache.key[:12]})")
        return
    if config.setup:
        run_setup(sandbox, config, ctx.transcript, ctx.progress, ctx.redactor.redact, deadline=ctx.deadline)
        sandbox.set_network(agent_policy)  # restarts agentd: nothing setup started survives
    if cache is not None and not kept:
        saved = cache.save(sandbox.launcher)
        ctx.transcript.record("setup_cache", result="miss", key=cache.key[:12], saved=saved)
        ctx.progress(f"setup cache {cache.key[:12]}: {saved}")


def run_the_agent(ctx: _Context, repo: _Repo, sandbox: Restarting, model: Model,
                  tools: Toolset) -> tuple[AgentResult, Verification, Outcome | None]:
    """The agent loop on the task, offered `tools`, with the hand-back review, decode.yml's `verify:` and its
    `review:` before its answer; the agent's result counts the review pass's turns and cost."""
    ctx.transcript.record("phase", name="agent")
    config, redact = repo.config, ctx.redactor.redact
    network = network_rule(internet=config.network, allow_domains=config.allow_domains,
                           allow_cidrs=config.allow_cidrs)
    verifier = Verifier(sandbox, config, ctx.transcript, ctx.progress, redact, ctx.deadline)
    ctx.beside.after_first_request(repo.ws.keep_tree, "decode-keep-tree")  # for the next run, off this one's path
    max_file = ctx.sandbox.max_file_mb * MB
    reviewer = SelfReview(model, sandbox, repo.ws.base_sha, ctx.job.task, ctx.budget, ctx.transcript, redact,
                          ctx.started, dict(ctx.model.prices), purse=ctx.job.purse) \
        if config.review and ctx.job.tools.keeps_changes else None
    agent = run_agent(
        model=model, sandbox=sandbox,
        system=system_prompt(root=sandbox.root, network=network, instructions=repo.instructions.parts),
        task=task_message(ctx.job.task, repo_facts(repo.ws, ctx.job.branch)), budget=ctx.budget,
        recorder=ctx.transcript, prices=dict(ctx.model.prices), progress=ctx.progress, redact=redact,
        started=ctx.started, thinking=repo.thinking, info=repo.info, after_tools=sandbox.checkpoint,
        before_finish=finish_gate(lambda: review_hand_back(sandbox, repo.ws.base_sha, max_file, ctx.transcript)
                                  if ctx.job.tools.keeps_changes else None, verifier, reviewer),
        tools=tools, purse=ctx.job.purse,
    )
    if reviewer is None:
        return agent, verifier.verification, None
    return with_review(agent, reviewer.outcome), verifier.verification, reviewer.outcome


def commit_work(ctx: _Context, repo: _Repo, work: _Work) -> Ran:
    """Apply the hand-back to the clean clone and commit it there; the run's result."""
    agent, max_file = work.agent, ctx.sandbox.max_file_mb * MB
    applied = repo.ws.apply_patch(work.hand.patch, keep_workflows=repo.config.allow_workflow_changes,
                                  max_file_bytes=max_file)
    left_out = {**work.hand.left_out, **applied.left_out}
    if left_out:
        _note(ctx, "left out of the commit: " + "; ".join(f"{path} ({why})" for path, why in sorted(left_out.items())),
              show=False)
    commit = repo.ws.commit(commit_message(ctx.job.title or ctx.job.task, agent, ctx.redactor.redact), ctx.job.co_author)
    job = ctx.job
    state = state_of(agent.stop_reason, commit, read_only=not job.tools.keeps_changes, answered=agent.answered)
    result = RunResult(
        run_id=job.run_id, state=state, repo=ctx.redactor.redact(job.repo),
        branch=job.branch, attempt=job.attempt, commit=commit, changed=tuple(applied.changed), left_out=left_out,
        blocked=work.blocked, verified=work.verification.verified, stop_reason=agent.stop_reason,
        figures=Figures.of(agent), error=one_line(ctx.redactor.redact(agent.error)) if agent.error else None,
        exit_code=agent.exit_code, restarts=work.restarts)
    return Ran(job, result, agent, work.verification, ctx.run_dir, repo.ws, work.review)


def close_run(ctx: _Context, ws: Workspace | None, ran: Ran | None) -> None:
    """Drop what is not needed any more (every clone without a commit; the sandbox's copy), write
    transcript.md and record.json: the run's result, or a failed one when it did not get that far."""
    if ws is not None:  # a sandbox that failed to start may not have waited for the copy's checkout
        with suppress(Exception):
            ws.ready()
    if ran is None or ran.result.commit is None:
        drop_clones(ctx.run_dir)
    elif ws is not None:  # the clean clone stays for publishing
        remove_tree(ws.path)
    ctx.transcript.close()
    ctx.transcript.write_markdown()
    write_record(ctx.run_dir, ran.result if ran is not None else _unfinished(ctx))
    ctx.beside.join()
    if (mirrors := Mirrors.of(ctx.store)) is not None:  # the kept tree just made counts in the bound
        mirrors.prune_for(ctx.store)


def _unfinished(ctx: _Context) -> RunResult:
    """The failed result of a run that ended before its own (an error, an interrupt), from its `run_end`."""
    end: dict[str, Any] = next((e for e in reversed(ctx.transcript.events()) if e["type"] == "run_end"), {})
    job = ctx.job
    return RunResult(run_id=job.run_id, state="failed", repo=ctx.redactor.redact(job.repo), branch=job.branch,
                     attempt=job.attempt, stop_reason=str(end.get("stop_reason") or "error"),
                     error=str(end.get("error") or "the run did not start"), exit_code=1)


def _note(ctx: _Context, text: str, *, show: bool = True) -> None:
    ctx.transcript.record("note", text=text)
    if show:
        ctx.progress(text)
