"""A piece of work, start to end on GitHub: admit, authorize, acknowledge, plan, run, publish
(bot/github/publish.py), report.

The job reads GitHub's facts through the forge and does what the pure decisions of bot/github/plan.py
say: `admit` (whether unasked work runs, whose permission is checked, whether a tracking comment
follows) and `plan` (the task, or why not: a fork outside an isolating sandbox; the edited-since note).

The tracking comment is posted before anything can fail and is always edited at
the end, to the pull request or to the error: a job that was accepted is never
left silent. Pushes happen from the host's clean clone, never from the sandbox.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from github import GithubException

from bot.config import GitHubSettings, JobParts
from bot.core.errors import ConfigError, DecodeError
from bot.github.links import run_link
from bot.core.text import one_line
from bot.core.names import BRANCH_PREFIX
from bot.core.redact import Redactor
from bot.github.attempts import attempts_of, best_of
from bot.github.allow import open_allow_pull
from bot.github.bots import BOT_RUN, acted_by, bot_allowed, cap_text, is_bot
from bot.github.check_run import CheckRun, start_check_run
from bot.github.conclusion import Conclusion, marker
from bot.github.forge import Forge, access_problem
from bot.github.info import IssueInfo, PullInfo, RepoInfo
from bot.github.plan import AllowHosts, CiRound, Facts, OptIn, Plan, PlanComment, Skip, admit, plan, unasked
from bot.github.planning import PlanText, publish_plan, read_plan
from bot.github.publish import answer_threads, publish
from bot.github.task_text import ci_task_text
from bot.github.tracking import Tracker
from bot.github.triggers import may_trigger, refusal_text
from bot.github.retry import is_transient
from bot.github.resume import PullState, continues_marker, note_of, read_state, record_run, resumable
from bot.github.work import (
    Allow, CheckSuite, Continue, Dispatch, Go, Labels, Review, Work, asked_by, reaction_target,
)
from bot.model import Model
from bot.run.pipeline import Job, Ran, execute
from bot.run.repo_config import PATH, RepoConfig, config_of
from bot.workspace.run_dirs import drop_clones

log = logging.getLogger(__name__)


def _quiet(line: str) -> None:
    """Progress nobody reads."""


@dataclass(frozen=True)
class JobContext:
    """One GitHub job: the work, the forge it talks to, and its identity (the settings it runs with are the
    process's, passed beside it).

    `run_id` names the run where its door shows it (its directory, its record, its page); `tag`
    (`core.names.run_tag`) is unique wherever the job's comments and branches are: it rides in the hidden
    markers of its comments and names the branch of work on no issue.
    Both stay the same when a job is retried (`attempt` > 1), so a retry finds and reuses the comments it
    posted instead of doubling them, and no other run (of another store or door) ever finds them. `run_url`
    links the run (an Actions run) from the tracking comment; `model` is a shared model (None: one per run);
    `authorize` is False where the caller vouches for the sender (the CLI, a workflow run); `progress` hears
    the run's lines."""

    work: Work
    forge: Forge
    run_id: str
    tag: str
    attempt: int = 1
    run_url: str | None = None
    model: Model | None = None
    authorize: bool = True
    attempts: int | None = None  # `decode run --attempts N`; None: the comment's `attempts=N`, else decode.yml's
    progress: Callable[[str], None] = _quiet


def run_github_job(ctx: JobContext, parts: JobParts) -> Conclusion:
    """Carry out `ctx.work` with the settings' `parts` and report on GitHub; errors end in the tracking comment, not in
    silence."""
    work, forge, run_id = ctx.work, ctx.forge, ctx.run_id
    redactor = parts.run.redactor
    try:
        admitted = admit(work, _opt_in(work, forge) if unasked(work) else None, authorize=ctx.authorize)
        if isinstance(admitted, Skip):
            _notify(work, forge, admitted)
            return Conclusion.of_job("skipped", admitted.reason)
        if admitted.authorize and (refused := _refuse(work, forge, parts.github, ctx.tag)) is not None:
            return refused
        resume = _resumable(ctx, work) if isinstance(work, Continue) else None
        if isinstance(resume, Conclusion):
            return resume
        approved = _approved(ctx, work, parts.github.command) if isinstance(work, Go) else None
        if isinstance(approved, Conclusion):
            return approved
        # read before any write: a number that is not there (decode run --issue N) is told, not reacted to
        issue = forge.issue(work.repo, work.number) if work.number is not None else None
        page = run_link(parts.web, parts.run.store, run_id)
        tracking = _track(ctx, page, admitted.doing, continues_marker(resume) if resume else "") \
            if admitted.track else None
        check = start_check_run(forge, work, ctx.tag, page or ctx.run_url)
    except Exception as e:  # noqa: BLE001 - nowhere to report it: the token or the issue is refused, or GitHub failed
        if is_transient(e):  # nothing said or done yet: a job runner runs it again later (bot/jobs/lease.py)
            text = redactor.redact(str(e) or type(e).__name__)
            return Conclusion.of_job("failed", f"GitHub did not answer: {text}", error=e, retry_later=True)
        error: Exception = e
        if isinstance(e, GithubException) and e.status in (401, 403, 404):
            error = _refusal(e, work, forge, parts.github.api_url)
        text = redactor.redact(str(error) or type(error).__name__)
        _unforeseen(run_id, error, text)
        return Conclusion.of_job("failed", text, error=error)
    try:
        info = forge.repository(work.repo)  # preflight: the token works and can read the repository
        facts = _facts(ctx, info, issue, admitted.ci, redactor, resume, approved)
        decided = plan(work, facts, tag=ctx.tag, sandbox_mode=parts.run.sandbox.mode)
        conclusion = Conclusion.of_job("skipped", decided.reason) if isinstance(decided, Skip) else \
            _work(ctx, parts, decided, info, tracking, check, page)
        if conclusion.ran is not None:  # published: the clone is not needed any more (see run_dirs)
            drop_clones(conclusion.ran.run_dir)
        if edited := (decided.note if isinstance(decided, Plan) else None):
            conclusion = dataclasses.replace(conclusion, message=f"{conclusion.message}\n\n{edited}")
    except Exception as e:  # noqa: BLE001 - every failure is reported on the issue and concluded
        ran, e = (e.ran, e.cause) if isinstance(e, Unpublished) else (None, e)
        text = redactor.redact(str(e) or type(e).__name__)
        _unforeseen(run_id, e, text)
        if isinstance(resume, PullState):
            _record_failure(ctx, resume, text)
        if tracking is not None:
            tracking.finish(f"❌ decode-bot could not finish this run{_run(ctx.run_url)}:\n\n```text\n{text}\n```")
        failed = Conclusion.of_job("failed", text, ran=ran, error=e)
        check.finish(failed, redactor.redact)
        return failed
    if tracking is not None:
        tracking.finish(conclusion.message)
    check.finish(conclusion, redactor.redact)
    return conclusion


def _unforeseen(run_id: str, error: Exception, text: str) -> None:
    """Log the traceback of a failure that is not a `DecodeError` (a bug, an unforeseen answer), for whoever
    runs the bot. A `DecodeError` is one line that the conclusion carries, and its reader says it once: the
    worker's log line, the CLI's last line, the Action's annotation."""
    if not isinstance(error, DecodeError):
        log.error("job %s failed: %s", run_id, text, exc_info=error)


def _opt_in(work: Review | CheckSuite, forge: Forge) -> OptIn:
    """What `admit` decides unasked work from: the pull request, who opened it, its base's decode.yml (read
    through the API, since no clone exists yet; never the head's) and, for a failed suite, its commits."""
    issue, pull = forge.issue(work.repo, work.number), forge.pull(work.repo, work.number)
    commits = tuple(forge.pull_commits(work.repo, work.number)) if isinstance(work, CheckSuite) else ()
    return OptIn(issue.author, forge.bot_login(), pull, forge.file_at(work.repo, PATH, pull.base_ref), commits)


def _notify(work: Work, forge: Forge, skip: Skip) -> None:
    """Post the skip's notice on the pull request, once."""
    if skip.notice is not None and work.number is not None:
        tag, text = skip.notice
        if forge.find_comment(work.repo, work.number, tag) is None:
            forge.post_comment(work.repo, work.number, text, tag)


def _resumable(ctx: JobContext, work: Continue) -> PullState | Conclusion:
    """What `/decode continue` carries on (bot/github/resume.py), or the skipped conclusion after one reply
    that says why not: not decode-bot's pull request, its last run finished, or its stop is continued already.
    The tracking comment of this very run (a retried job) does not count as another run continuing it."""
    forge, repo, number = ctx.forge, work.repo, work.number
    pull = forge.pull(repo, number) if work.is_pull_request else None
    state = read_state(pull.body) if pull is not None else None
    continued = False
    if state is not None:
        found = forge.find_comment(repo, number, continues_marker(state))
        continued = found is not None and found != forge.find_comment(repo, number, marker("run", ctx.tag))
    author = forge.issue(repo, number).author if pull is not None else ""
    decided = resumable(work, pull, author, forge.bot_login(), state, continued)
    if isinstance(decided, PullState):
        return decided
    tag = marker("continue-refused", work.comment_id)
    if forge.find_comment(repo, number, tag) is None:
        forge.post_comment(repo, number, f"{decided}\n\n{tag}", tag)
    return Conclusion.of_job("skipped", decided)


def _approved(ctx: JobContext, work: Go, command: str) -> PlanText | Conclusion:
    """The issue's plan comment as it reads now, or the skipped conclusion after one reply saying there is none."""
    forge, repo, number = ctx.forge, work.repo, work.number
    found = read_plan(forge, repo, number)
    if found is not None:
        return found
    tag = marker("go-refused", work.comment_id)
    if forge.find_comment(repo, number, tag) is None:
        forge.post_comment(repo, number, f"There is no plan on this issue yet, so `{command} go` has nothing to carry "
                                         f"out. Comment `{command} plan` first (instructions may follow), read the "
                                         f"plan, then `{command} go`.\n\n{tag}", tag)
    return Conclusion.of_job("skipped", f"#{number} has no plan comment to carry out")


def _record_failure(ctx: JobContext, state: PullState, text: str) -> None:
    """A continuing run that failed before it wrote the pull request's description: its failure is recorded
    there as the stop the next `/decode continue` carries on (with the task and steps it was given). Best
    effort: when GitHub refuses this too, the stop it continued stays continued (docs/github.md)."""
    work = ctx.work
    assert work.number is not None
    note = note_of(ctx.tag, "error", f"decode-bot could not finish this run: {text}", None)
    try:
        record_run(ctx.forge, work.repo, work.number, note, state.task, state.last_steps)
    except Exception as lost:  # noqa: BLE001 - the run's own error is the one to report
        log.warning("job %s: could not record the failure in the pull request's description: %s", ctx.run_id, lost)


def _track(ctx: JobContext, page: str | None, doing: str, continues: str = "") -> Tracker:
    """React to the request and post (or, for a retried or released job, find and edit) the tracking comment."""
    work, forge, attempt = ctx.work, ctx.forge, ctx.attempt
    assert not isinstance(work, Dispatch | Labels), "a workflow run has no issue to track it on"
    repo, number = work.repo, work.number
    if (target := reaction_target(work)) is not None:
        forge.react(repo, target, "eyes")
    tag = marker("run", ctx.tag)
    links = " · ".join(filter(None, [ctx.run_url and f"[The run]({ctx.run_url})",
                                     page and f"📜 [Transcript]({page})"]))
    by = acted_by(work) if is_bot(work.sender_login, work.sender_type) else ""
    footer = "".join(f"{part}\n\n" for part in (by, links) if part) + tag + continues
    heading = f"👀 decode-bot is {doing}" + (f" (attempt {attempt})." if attempt > 1 else ".")
    tracker = Tracker(forge, repo, forge.find_comment(repo, number, tag), footer=footer, heading=heading)
    tracker.start(number, tag)
    return tracker


def _refusal(e: GithubException, work: Work, forge: Forge, api_url: str) -> DecodeError:
    """Why GitHub refused the first calls on `work`: the token, the repository, or the issue number."""
    if e.status == 401 or work.number is None:
        return ConfigError(access_problem(e, work.repo, api_url), status=e.status)
    try:
        forge.repository(work.repo)
    except DecodeError as refused:
        return refused
    return ConfigError(f"#{work.number} is not an issue or pull request of {work.repo} that this token can "
                       f"see ({e.status}): check the number", status=e.status)


def _refuse(work: Work, forge: Forge, github: GitHubSettings, tag: str) -> Conclusion | None:
    """None when the sender may start work; else the skipped conclusion, after one polite reply."""
    login, me = work.sender_login, forge.bot_login()
    if login.lower() == (me or "").lower():
        return Conclusion.of_job("skipped", f"{login} is decode-bot itself, which never starts its own work")
    if is_bot(login, work.sender_type):  # silent but for the cap's one reply: a reply to a bot feeds a loop
        if isinstance(work, Go | Allow):
            return Conclusion.of_job("skipped", f"{login} is a bot: only a person approves a plan or allows a host")
        if not bot_allowed(login, _default_config(work.repo, forge).allowed_bots, me):
            return Conclusion.of_job("skipped", f"{login} is a bot that allowed_bots in {PATH} on the default "
                                                "branch does not list")
        return _bot_limits(work, forge, github, tag)
    permission = forge.permission(work.repo, login)
    if may_trigger(permission):
        return None
    if work.number is not None and not (isinstance(work, Review) and not work.by_command):  # unasked: no reply
        tag = marker("refused", asked_by(work))
        if forge.find_comment(work.repo, work.number, tag) is None:
            forge.post_comment(work.repo, work.number,
                               refusal_text(login, permission, github.command) + "\n\n" + tag, tag)
    return Conclusion.of_job("skipped", f"{login} has {permission} permission; write access is needed")


def _bot_limits(work: Work, forge: Forge, github: GitHubSettings, tag: str) -> Conclusion | None:
    """An allowed bot's work: None, or skipped on a pull request from a `decode/` branch (decode-bot's own: a CI
    workflow there runs the agent's code, which could post the command as the bot), or past the runs bots may
    start on this issue or pull request (`DECODE_MAX_BOT_RUNS`), said once. This job's own comment (a retry)
    does not count."""
    login, repo, number = work.sender_login, work.repo, work.number
    if number is None:
        return None
    if getattr(work, "is_pull_request", False) and forge.pull(repo, number).head_ref.startswith(BRANCH_PREFIX):
        return Conclusion.of_job("skipped", f"{login} is a bot, and bots' commands on decode-bot's own pull "
                                            f"requests ({BRANCH_PREFIX} branches) are ignored")
    own = forge.find_comment(repo, number, marker("run", tag))
    runs = len([found for found in forge.find_comments(repo, number, BOT_RUN) if found != own])
    cap = github.max_bot_runs
    if runs < cap:
        return None
    said = marker("bot-runs-capped", number)
    if forge.find_comment(repo, number, said) is None:
        forge.post_comment(repo, number, f"{cap_text(login, runs, cap, github.command)}\n\n{said}", said)
    return Conclusion.of_job("skipped", f"bots have started {runs} runs on #{number}, DECODE_MAX_BOT_RUNS ({cap})")


def _default_config(repo: str, forge: Forge) -> RepoConfig:
    """decode.yml as the default branch has it (read through the API, never from a pull request's head)."""
    branch = forge.repository(repo).default_branch
    return config_of(forge.file_at(repo, PATH, branch), f" on {branch}")


def _facts(ctx: JobContext, info: RepoInfo, issue: IssueInfo | None, ci: tuple[int, int] | None, redactor: Redactor,
           resume: PullState | None, approved: PlanText | None) -> Facts:
    """What `plan` decides from: the `issue` (and its pull request) as GitHub has them now, a review's comments,
    for round `ci` of a CI fix the task made of the failed checks, and what `_resumable` and `_approved` read."""
    work, forge = ctx.work, ctx.forge
    repo, number = work.repo, work.number
    pull: PullInfo | None = forge.pull(repo, number) if number is not None and issue and issue.is_pull else None
    review = tuple(forge.review_comments(repo, work.number, work.review_id)) if isinstance(work, Review) else ()
    ci_round = None
    if isinstance(work, CheckSuite) and ci is not None:
        redact = redactor.redact
        failures = forge.failed_checks(repo, work.head_sha, redact=redact)
        ci_round = CiRound(ci[0], ci[1], ci_task_text(failures, redact=redact, pr_number=work.number,
                                                      head_sha=work.head_sha, round=ci[0], rounds=ci[1]))
    return Facts(info, issue, pull, review, ci_round, resume, approved)


def _work(ctx: JobContext, parts: JobParts, the_plan: Plan, info: RepoInfo, tracking: Tracker | None,
          check: CheckRun, page: str | None) -> Conclusion:
    """Run `the_plan` and publish its delivery; `tracking` and `check` follow the run, `page` is its transcript
    page."""
    forge, run_id, repo = ctx.forge, ctx.run_id, ctx.work.repo
    model, progress, attempt = ctx.model, ctx.progress, ctx.attempt
    token = forge.token_for(repo)
    if isinstance(the_plan.delivery, AllowHosts):
        assert ctx.work.number is not None
        return open_allow_pull(forge, repo, the_plan, number=ctx.work.number, asker=ctx.work.sender_login,
                               command=parts.github.command)
    job = Job(repo=info.clone_url, task=the_plan.task, branch=the_plan.branch, run_id=run_id,
              base=the_plan.base, co_author=the_plan.co_author, title=the_plan.title,
              config_base=the_plan.config_base, attempt=attempt, token=token, tools=the_plan.mode.tools)
    try:
        count = attempts_of(ctx.attempts or getattr(ctx.work, "attempts", None), forge, repo,
                            the_plan.config_base or the_plan.base or info.default_branch) \
            if job.tools.keeps_changes else 1  # a planning run is one: it publishes no diff to pick from
        if count == 1:
            outcome = execute(job, parts.run, client=model, progress=progress, watch=_watch(tracking, check))
            attempts = ""
        else:
            outcome, attempts = best_of(job, parts.run, parts.web, count, progress, tracking, check,
                                         ctx.run_url)
    except Exception as e:
        if the_plan.threads is not None:  # the threads hear why; the tracking comment has the details
            text = one_line(parts.run.redactor.plus(token).redact(str(e) or type(e).__name__))[:500]
            try:
                answer_threads(forge, repo, the_plan.threads, "❌ decode-bot could not finish this run, so nothing "
                               f"was pushed for this review: {text}")
            except Exception as lost:  # noqa: BLE001 - the run's own error is the one to report
                log.warning("job %s: could not answer the review's threads: %s", run_id, lost)
        raise
    if tracking is not None:
        tracking.move("publishing")
    check.move("publishing")
    redact = parts.run.redactor.plus(token).redact
    try:
        if isinstance(the_plan.delivery, PlanComment):
            return publish_plan(forge, repo, the_plan.delivery.number, outcome, redact,
                                command=parts.github.command, transcript_url=page)
        return publish(the_plan, outcome, forge, repo, ctx.tag, redact, transcript_url=page,
                       command=parts.github.command, attempts=attempts)
    except Exception as e:
        raise Unpublished(e, outcome) from e


def _watch(tracking: Tracker | None, check: CheckRun) -> Callable[[dict[str, Any]], None]:
    """The run's events to the tracking comment and the check run."""
    def watch(event: dict[str, Any]) -> None:
        if tracking is not None:
            tracking.on_event(event)
        check.on_event(event)
    return watch


class Unpublished(Exception):
    """Publishing failed after the run: the failure is `cause`'s, and the run (its result, its committed
    clone) is kept with it, so the job's stored result and record.json keep the run's figures."""

    def __init__(self, cause: Exception, ran: Ran) -> None:
        super().__init__(str(cause))
        self.cause, self.ran = cause, ran


def _run(run_url: str | None) -> str:
    return f" ([run]({run_url}))" if run_url else ""
