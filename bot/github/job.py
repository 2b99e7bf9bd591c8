"""A piece of work, start to end on GitHub: authorize, acknowledge, run, publish, report.

The tracking comment is posted before anything can fail and is always edited at
the end, to the pull request or to the error: a job that was accepted is never
left silent. Pushes happen from the host's clean clone, never from the sandbox.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from github import GithubException

from bot.config import Settings
from bot.errors import ConfigError, DecodeError
from bot.github.body import BODY_LIMIT, pull_request_texts
from bot.github.forge import Forge, IssueInfo, PullInfo, RepoInfo, access_problem
from bot.github.notes import harness_notes, patch_parts
from bot.github.plan import Facts, OpenPull, Plan, PushToPull, ToFork, plan
from bot.github.tracking import Tracker
from bot.model import Model
from bot.pipeline import Job, Outcome, execute
from bot.redact import Redactor
from bot.run_dirs import drop_clones
from bot.sandbox import ISOLATING
from bot.task_text import one_line
from bot.transcript import render_figures, safe_prose
from bot.triggers import may_trigger, refusal_text
from bot.work import Comment, Dispatch, Issue, ReviewComment, Work, asked_by, reaction_target

log = logging.getLogger(__name__)


@dataclass
class Conclusion:
    """How a job ended: the one value the webhook worker, the Modal app, the Action and the CLI all read."""

    state: str  # success | incomplete | no_changes | failed | skipped
    message: str = ""
    pr_url: str | None = None
    branch: str | None = None
    outcome: Outcome | None = None
    error: Exception | None = None  # why it failed before or around the run (a ConfigError: input to fix)

    @property
    def exit_code(self) -> int:
        """0 done, nothing to change or skipped; 1 failed; 2 a setting or input to fix; 3 stopped by a
        budget cap; 130 interrupted. The one table the CLI and the Action share."""
        if self.state == "failed":
            return 2 if isinstance(self.error, ConfigError) else 1
        if self.outcome is not None and self.outcome.result.stop_reason == "interrupted":
            return self.outcome.result.exit_code
        return 3 if self.state == "incomplete" else 0

    def record(self) -> dict[str, Any]:
        """The conclusion as the job store keeps it (and a Modal function call returns it): JSON, no secret
        (`message` is redacted where it is made), the figures of the run when the agent ran."""
        figures = None
        if self.outcome is not None:
            r = self.outcome.result
            figures = {"turns": r.turns, "seconds": r.wall_s, "cost_usd": r.cost_usd, "tokens": {
                "input": r.usage.input_tokens, "output": r.usage.output_tokens,
                "cache_read": r.usage.cache_read_tokens, "cache_write": r.usage.cache_creation_tokens}}
        error = (self.message or "failed").splitlines()[0].removeprefix("❌ ") if self.state == "failed" else None
        return {"state": self.state, "exit_code": self.exit_code, "error": error, "pr_url": self.pr_url,
                "branch": self.branch, "figures": figures}


def marker(kind: str, key: object) -> str:
    """A hidden tag that lets a retried job find the comment it already posted."""
    return f"<!-- decode-bot:{kind}:{key} -->"


def run_github_job(work: Work, settings: Settings, forge: Forge, *, run_id: str, run_url: str | None = None,
                   model: Model | None = None, authorize: bool = True, attempt: int = 1,
                   progress: Callable[[str], None] = lambda line: None) -> Conclusion:
    """Carry out `work` and report on GitHub; errors end in the tracking comment, not in silence.

    `run_id` must stay the same when a job is retried (`attempt` > 1): it tags the
    comments the job posts, so a retry finds and reuses them instead of doubling them.
    """
    repo = work.repo
    redactor = Redactor(settings.secrets())
    try:
        if authorize and (refused := _refuse(work, forge, settings)) is not None:
            return refused
        tracking = None if isinstance(work, Dispatch) else _track(work, forge, run_id, run_url, attempt)
    except Exception as e:  # noqa: BLE001 - nowhere to report it: the token or the issue is refused, or GitHub failed
        refused = isinstance(e, GithubException) and e.status in (401, 403, 404)
        error = _refusal(e, work, forge, settings.github_api_url) if refused else e
        text = redactor.redact(str(error) or type(error).__name__)
        log.error("job %s failed: %s", run_id, text, exc_info=not isinstance(error, DecodeError))
        return Conclusion("failed", text, error=error)
    try:
        info = forge.repository(repo)  # preflight: the token works and can read the repository
        edited = _edited_note(work, forge)
        conclusion = _work(work, info, settings, forge, run_id=run_id, attempt=attempt, model=model,
                           progress=progress, tracking=tracking)
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


def _track(work: Issue | Comment | ReviewComment, forge: Forge, run_id: str, run_url: str | None,
           attempt: int) -> Tracker:
    """React to the request and post (or, for a retried or released job, find and edit) the tracking comment."""
    repo, number = work.repo, work.number
    forge.react(repo, reaction_target(work), "eyes")
    tag = marker("run", run_id)
    footer = (f"[The run]({run_url})\n\n" if run_url else "") + tag
    heading = "👀 decode-bot is working on this" + (f" (attempt {attempt})." if attempt > 1 else ".")
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
    if work.number is not None:
        tag = marker("refused", asked_by(work))
        if forge.find_comment(work.repo, work.number, tag) is None:
            forge.post_comment(work.repo, work.number,
                               refusal_text(login, permission, settings.command) + "\n\n" + tag, tag)
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
        ("the command was posted", "as it was when the command was posted")
    return (f"ℹ️ The {what} was edited after {when[0]}; decode-bot worked on the text {when[1]}. "
            f"Run it again to work on the current text.")


def _work(work: Work, info: RepoInfo, settings: Settings, forge: Forge, *, run_id: str, attempt: int,
          model: Model | None, progress: Callable[[str], None], tracking: Tracker | None) -> Conclusion:
    """Fetch the facts, plan, run the plan, publish its delivery; `tracking` follows the run."""
    repo, number = work.repo, work.number
    issue: IssueInfo | None = forge.issue(repo, number) if number is not None else None
    pull: PullInfo | None = forge.pull(repo, number) if issue and issue.is_pull else None
    the_plan = plan(work, Facts(info, issue, pull), run_id=run_id)
    fork = isinstance(the_plan.delivery, ToFork)
    if fork and settings.sandbox_mode not in ISOLATING:
        return Conclusion("skipped", f"🔒 decode-bot did not run: this pull request comes from a fork, and a "
                          f"fork's code runs only in an isolating sandbox ({', '.join(ISOLATING)}). This "
                          f"installation runs SANDBOX_MODE={settings.sandbox_mode}, which would give the "
                          "fork's code the bot's own access; ask its operator to switch, or push the branch to "
                          "this repository.")
    token = forge.token_for(repo)
    job = Job(repo=info.clone_url, task=the_plan.task, branch=the_plan.branch, run_id=run_id,
              base=the_plan.clone_base, co_author=the_plan.co_author, title=the_plan.title,
              config_base=the_plan.config_base, attempt=attempt, token=token)
    outcome = execute(job, settings, model=model, progress=progress,
                      watch=tracking.on_event if tracking is not None else None)
    if tracking is not None:
        tracking.move("publishing")
    return _publish(the_plan, outcome, forge, repo, run_id, Redactor([*settings.secrets(), token]).redact)


def _publish(the_plan: Plan, outcome: Outcome, forge: Forge, repo: str, run_id: str,
             redact: Callable[[str], str]) -> Conclusion:
    """Deliver the outcome as the plan says, and the report for the tracking comment."""
    result, branch, delivery = outcome.result, the_plan.branch, the_plan.delivery
    figs = render_figures(result.figures())
    transcript = outcome.transcript_md.read_text()
    summary = safe_prose(redact(result.summary))  # whole, before any cap
    notes = harness_notes(left_out=outcome.left_out, blocked=outcome.blocked)
    failure = f"❌ decode-bot failed: {one_line(redact(result.error or result.stop_reason))}"
    on_fork = isinstance(delivery, ToFork)
    if outcome.commit is None or outcome.workspace is None:
        if result.failed:
            return Conclusion("failed", f"{failure}\n\n{summary}\n\n{figs}\n\n{notes}".rstrip(),
                              branch=None if on_fork else branch, outcome=outcome)
        return Conclusion("no_changes", f"🤷 decode-bot made no changes.\n\n{summary}\n\n{figs}\n\n{notes}".rstrip(),
                          branch=None if on_fork else branch, outcome=outcome)
    state = "success" if result.completed else "failed" if result.failed else "incomplete"
    if isinstance(delivery, ToFork):
        return _publish_to_fork(forge, repo, delivery.pull, outcome, run_id, state=state, summary=summary,
                                figs=figs, notes=notes, transcript=transcript,
                                failure=failure if result.failed else None)
    outcome.workspace.push(forge.token_for(repo), force=isinstance(delivery, OpenPull))
    if isinstance(delivery, PushToPull):  # new commits on the PR's own branch; the reply carries the rest
        body, rest = pull_request_texts(summary=summary, issue_number=None, figures=figs, transcript=transcript,
                                        notes=notes, limit=BODY_LIMIT - 1000)
        _post_parts(forge, repo, delivery.number, rest, run_id)
        head = f"✅ Pushed {outcome.commit[:12]} to `{branch}`." if result.completed else \
            f"{failure}. The work so far ({outcome.commit[:12]}) is pushed to `{branch}`." if result.failed else \
            f"⚠️ Pushed partial work ({outcome.commit[:12]}) to `{branch}`: {result.stop_reason}."
        return Conclusion(state, f"{head}\n\n{body}", branch=branch, outcome=outcome)
    title = the_plan.title.splitlines()[0] if the_plan.title.strip() else "decode run"
    body, rest = pull_request_texts(summary=summary, issue_number=delivery.closes, figures=figs,
                                    transcript=transcript, notes=notes)
    pr = forge.open_or_update_pull(repo, head=branch, base=delivery.base, title=title[:250], body=body,
                                   draft=not result.completed)
    _post_parts(forge, repo, pr.number, rest, run_id)
    verb = "Opened" if pr.created else "Updated"
    note = "" if result.completed else f" as a draft: the run {result.stop_reason.replace('_', ' ')}"
    head = f"{failure}. The work so far is in the draft {pr.html_url}." if result.failed else \
        f"{'✅' if result.completed else '⚠️'} {verb} {pr.html_url}{note}."
    message = f"{head}\n\n{figs}\n\n{notes}".rstrip()
    return Conclusion(state, message, pr_url=pr.html_url, branch=branch, outcome=outcome)


def _publish_to_fork(forge: Forge, repo: str, pull: PullInfo, outcome: Outcome, run_id: str, *, state: str,
                     summary: str, figs: str, notes: str, transcript: str, failure: str | None = None) -> Conclusion:
    """A fork's pull request: push to its head branch when maintainers may edit it, else reply with a patch.
    A failed run (`failure`: its one-line reason) says so first, then where its work so far went.

    The fork's commits are never pushed into the base repository, where its workflows would run with
    the base repository's secrets; only the agent's one commit goes to the fork's own branch.
    """
    ws, commit = outcome.workspace, outcome.commit
    assert ws is not None and commit is not None
    started = ws.base_sha
    where = f"`{pull.head_repo}:{pull.head_ref}`"
    why = "the pull request does not allow edits by maintainers"
    if pull.maintainer_can_modify and pull.head_clone_url:
        try:
            ws.push(forge.token_for(repo), remote=pull.head_clone_url)
        except DecodeError as e:
            why = f"GitHub refused the push ({ws.redactor.redact(str(e))[:300]})"
        else:
            body, rest = pull_request_texts(summary=summary, issue_number=None, figures=figs,
                                            transcript=transcript, notes=notes, limit=BODY_LIMIT - 1000)
            _post_parts(forge, repo, pull.number, rest, run_id)
            verb = "Pushed" if state == "success" else "Pushed partial work"
            head = f"{'✅' if state == 'success' else '⚠️'} {verb} {commit[:12]} to the fork's branch {where}, " \
                   f"on top of {started[:12]} (the head this run started from)."
            if failure:
                head = f"{failure}. The work so far ({commit[:12]}) is pushed to the fork's branch {where}, on " \
                       f"top of {started[:12]} (the head this run started from)."
            return Conclusion(state, f"{head}\n\n{body}", branch=pull.head_ref, outcome=outcome)
    patch = ws.git("format-patch", "-1", "--stdout", "--binary", commit, what="writing the patch")
    parts = patch_parts(patch.decode("utf-8", "replace"), started_from=started, limit=BODY_LIMIT - 1000)
    body, rest = pull_request_texts(summary=summary, issue_number=None, figures=figs, transcript=transcript,
                                    notes=notes, limit=BODY_LIMIT - 1000 - len(parts[0]))
    _post_parts(forge, repo, pull.number, parts[1:] + rest, run_id)
    head = (f"📎 decode-bot could not push to {where}: {why}. The change, made on top of {started[:12]} (the "
            "head this run started from), is in the patch below" + (" and the comments that follow" if
                                                                   len(parts) > 1 else "") + ".")
    if failure:
        head = f"{failure}. The work so far is not pushed to {where} ({why}); it is in the patch below."
    return Conclusion(state, f"{head}\n\n{parts[0]}\n{body}", outcome=outcome)


def _post_parts(forge: Forge, repo: str, number: int, parts: list[str], run_id: str) -> None:
    """Post the transcript parts that did not fit, each once even if the job is retried."""
    for i, part in enumerate(parts, 2):
        tag = marker("transcript", f"{run_id}-{i}")
        if forge.find_comment(repo, number, tag) is None:
            forge.post_comment(repo, number, part + "\n" + tag, tag)


def _run(run_url: str | None) -> str:
    return f" ([run]({run_url}))" if run_url else ""
