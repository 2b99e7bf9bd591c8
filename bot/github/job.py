"""A piece of work, start to end on GitHub: authorize, acknowledge, run, publish (bot/github/publish.py),
report.

The tracking comment is posted before anything can fail and is always edited at
the end, to the pull request or to the error: a job that was accepted is never
left silent. Pushes happen from the host's clean clone, never from the sandbox.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from github import GithubException

from bot.config import Settings
from bot.core.errors import ConfigError, DecodeError
from bot.github.checks import ci_task_text
from bot.github.conclusion import Conclusion, marker
from bot.github.forge import Forge, access_problem
from bot.github.info import IssueInfo, PullInfo, RepoInfo
from bot.github.gates import ci_gate, review_gate
from bot.github.plan import CiRound, Facts, ToFork, plan
from bot.github.publish import answer_threads, publish
from bot.github.tracking import Tracker
from bot.core.links import run_link
from bot.model import Model
from bot.run.pipeline import Job, execute
from bot.workspace.run_dirs import drop_clones
from bot.sandbox import ISOLATING
from bot.run.task_text import one_line
from bot.github.triggers import may_trigger, refusal_text
from bot.github.work import CheckSuite, Comment, Dispatch, Issue, Review, ReviewComment, Work, asked_by, reaction_target

log = logging.getLogger(__name__)


def run_github_job(work: Work, settings: Settings, forge: Forge, *, run_id: str, run_url: str | None = None,
                   model: Model | None = None, authorize: bool = True, attempt: int = 1,
                   progress: Callable[[str], None] = lambda line: None) -> Conclusion:
    """Carry out `work` and report on GitHub; errors end in the tracking comment, not in silence.

    `run_id` must stay the same when a job is retried (`attempt` > 1): it tags the
    comments the job posts, so a retry finds and reuses them instead of doubling them.
    """
    repo = work.repo
    redactor = settings.redactor
    try:
        if isinstance(work, Review) and not work.by_command and (why := review_gate(work, forge)) is not None:
            log.info("job %s: the review starts nothing: %s", run_id, why)
            return Conclusion("skipped", why)
        ci = ci_gate(work, forge) if isinstance(work, CheckSuite) else None
        if isinstance(ci, str):
            log.info("job %s: the failed check suite starts nothing: %s", run_id, ci)
            return Conclusion("skipped", ci)
        # a failed suite's sender is whoever GitHub names; its authority is decode.yml's ci_fix (gates.py)
        if authorize and not isinstance(work, CheckSuite) and (refused := _refuse(work, forge, settings)) is not None:
            return refused
        page = run_link(settings, run_id)
        doing = f"fixing the failing checks (round {ci[0]} of {ci[1]})" if isinstance(ci, tuple) else "working on this"
        tracking = None if isinstance(work, Dispatch) else _track(work, forge, run_id, run_url, page, attempt, doing)
    except Exception as e:  # noqa: BLE001 - nowhere to report it: the token or the issue is refused, or GitHub failed
        refused = isinstance(e, GithubException) and e.status in (401, 403, 404)
        error = _refusal(e, work, forge, settings.github.api_url) if refused else e
        text = redactor.redact(str(error) or type(error).__name__)
        log.error("job %s failed: %s", run_id, text, exc_info=not isinstance(error, DecodeError))
        return Conclusion("failed", text, error=error)
    try:
        info = forge.repository(repo)  # preflight: the token works and can read the repository
        edited = _edited_note(work, forge)
        conclusion = _work(work, info, settings, forge, run_id=run_id, attempt=attempt, model=model,
                           progress=progress, tracking=tracking, page=page, ci=ci)
        if conclusion.outcome is not None:  # published: the clone is not needed any more (see run_dirs)
            drop_clones(conclusion.outcome.run_dir)
        if edited:
            conclusion.message = f"{conclusion.message}\n\n{edited}"
    except Exception as e:  # noqa: BLE001 - every failure is reported on the issue and concluded
        text = redactor.redact(str(e) or type(e).__name__)
        log.error("job %s failed: %s", run_id, text, exc_info=not isinstance(e, DecodeError))
        if tracking is not None:
            tracking.finish(f"❌ decode-bot could not finish this run{_run(run_url)}:\n\n```text\n{text}\n```")
        return Conclusion("failed", text, error=e)
    if tracking is not None:
        tracking.finish(conclusion.message)
    return conclusion


def _track(work: Issue | Comment | ReviewComment | Review | CheckSuite, forge: Forge, run_id: str,
           run_url: str | None, page: str | None, attempt: int, doing: str) -> Tracker:
    """React to the request and post (or, for a retried or released job, find and edit) the tracking comment."""
    repo, number = work.repo, work.number
    if (target := reaction_target(work)) is not None:
        forge.react(repo, target, "eyes")
    tag = marker("run", run_id)
    links = " · ".join(filter(None, [run_url and f"[The run]({run_url})", page and f"📜 [Transcript]({page})"]))
    footer = (f"{links}\n\n" if links else "") + tag
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


def _refuse(work: Work, forge: Forge, settings: Settings) -> Conclusion | None:
    """None when the sender may start work; else the skipped conclusion, after one polite reply."""
    login = work.sender_login
    if work.sender_type == "Bot" or login == forge.bot_login():
        return Conclusion("skipped", f"{login} is a bot")
    permission = forge.permission(work.repo, login)
    if may_trigger(permission):
        return None
    if work.number is not None and not (isinstance(work, Review) and not work.by_command):  # unasked: no reply
        tag = marker("refused", asked_by(work))
        if forge.find_comment(work.repo, work.number, tag) is None:
            forge.post_comment(work.repo, work.number,
                               refusal_text(login, permission, settings.github.command) + "\n\n" + tag, tag)
    return Conclusion("skipped", f"{login} has {permission} permission; write access is needed")


def _edited_note(work: Work, forge: Forge) -> str | None:
    """A note for the report when the issue or pull request was edited after the event that started the job."""
    if isinstance(work, Dispatch) or work.title is None:
        return None
    now = forge.issue(work.repo, work.number)

    def same(a: str | None, b: str | None) -> bool:
        return (a or "").replace("\r\n", "\n").strip() == (b or "").replace("\r\n", "\n").strip()

    if same(now.title, work.title) and same(now.body, work.body):
        return None
    what = "pull request" if now.is_pull else "issue"
    when = ("it was labeled", "as it was when labeled") if work.kind == "issue" else \
        ("the review was submitted", "as it was then") if isinstance(work, Review) else \
        ("the command was posted", "as it was when the command was posted")
    return (f"ℹ️ The {what} was edited after {when[0]}; decode-bot worked on the text {when[1]}. "
            f"Run it again to work on the current text.")


def _work(work: Work, info: RepoInfo, settings: Settings, forge: Forge, *, run_id: str, attempt: int,
          model: Model | None, progress: Callable[[str], None], tracking: Tracker | None,
          page: str | None, ci: tuple[int, int] | None = None) -> Conclusion:
    """Fetch the facts, plan, run the plan, publish its delivery; `tracking` follows the run; `ci` is the
    round of a failed check suite's fix."""
    repo, number = work.repo, work.number
    issue: IssueInfo | None = forge.issue(repo, number) if number is not None else None
    pull: PullInfo | None = forge.pull(repo, number) if issue and issue.is_pull else None
    review = tuple(forge.review_comments(repo, work.number, work.review_id)) if isinstance(work, Review) else ()
    ci_round = None
    if isinstance(work, CheckSuite) and ci is not None:
        redact = settings.redactor.redact
        failures = forge.failed_checks(repo, work.head_sha, redact=redact)
        ci_round = CiRound(ci[0], ci[1], ci_task_text(failures, redact=redact, pr_number=work.number,
                                                      head_sha=work.head_sha, round=ci[0], rounds=ci[1]))
    the_plan = plan(work, Facts(info, issue, pull, review, ci_round), run_id=run_id)
    fork = isinstance(the_plan.delivery, ToFork)
    if fork and settings.sandbox.mode not in ISOLATING:
        return Conclusion("skipped", f"🔒 decode-bot did not run: this pull request comes from a fork, and a "
                          f"fork's code runs only in an isolating sandbox ({', '.join(ISOLATING)}). This "
                          f"installation runs SANDBOX_MODE={settings.sandbox.mode}, which would give the "
                          "fork's code the bot's own access; ask its operator to switch, or push the branch to "
                          "this repository.")
    token = forge.token_for(repo)
    job = Job(repo=info.clone_url, task=the_plan.task, branch=the_plan.branch, run_id=run_id,
              base=the_plan.clone_base, co_author=the_plan.co_author, title=the_plan.title,
              config_base=the_plan.config_base, attempt=attempt, token=token)
    try:
        outcome = execute(job, settings, model=model, progress=progress,
                          watch=tracking.on_event if tracking is not None else None)
    except Exception as e:
        if the_plan.threads is not None:  # the threads hear why; the tracking comment has the details
            text = one_line(settings.redactor.plus(token).redact(str(e) or type(e).__name__))[:500]
            try:
                answer_threads(forge, repo, the_plan.threads, "❌ decode-bot could not finish this run, so nothing "
                               f"was pushed for this review: {text}")
            except Exception as lost:  # noqa: BLE001 - the run's own error is the one to report
                log.warning("job %s: could not answer the review's threads: %s", run_id, lost)
        raise
    if tracking is not None:
        tracking.move("publishing")
    return publish(the_plan, outcome, forge, repo, run_id, settings.redactor.plus(token).redact,
                    transcript_url=page)


def _run(run_url: str | None) -> str:
    return f" ([run]({run_url}))" if run_url else ""
