"""The run's `decode-bot` check run: queued when the job starts, in progress with the phase as its title, then
completed with the run's conclusion, its summary, its verification and its figures.

A run on a pull request creates it on the PR's head commit; a run that opens or pushes to a pull request
completes one on the new head as well, so a required `decode-bot` check sees the commit it made
(docs/github.md, Check runs). Its `external_id` carries the run's tag and its work (`check_ref`), so a
retried job finds its check run again, and "Re-run" on GitHub (`check_run.rerequested`, bot/github/triggers.py)
starts the same work.

Like the tracking comment, the check run is a view of the run: a failed request is logged and never fails
the run. A token that may not create check runs (a personal token, an Actions token without
`checks: write`, an App installed before it asked for Checks) is said once in the log, and the run goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from github import GithubException

from bot.github.body import verification_section
from bot.github.conclusion import Conclusion
from bot.github.forge import Forge
from bot.github.info import CheckRunState
from bot.github.notes import agent_summary, restarts_note
from bot.github.tracking import PHASES
from bot.github.work import CHECK_NAME as NAME, CheckSuite, Work, check_ref
from bot.run.markdown import clip, fence
from bot.run.transcript import render_figures
from bot.run.verify import Verification

log = logging.getLogger(__name__)

LIMIT = 65_535  # characters of an output's summary and of its text (GitHub refuses longer ones)
TAIL_CHARS = 4_000  # of each failing verify command's output, in the text
TITLES = {"success": "Done", "failure": "Failed", "neutral": "No changes", "cancelled": "Interrupted"}


class CheckRun:
    """The check run of one job on `repo`; `external_id` finds it again, `details_url` is the transcript page."""

    def __init__(self, forge: Forge, repo: str, *, external_id: str, details_url: str | None) -> None:
        self.forge, self.repo = forge, repo
        self.external_id, self.details_url = external_id, details_url
        self.head_sha: str | None = None
        self.check_run_id: int | None = None
        self.refused = False
        self.title = ""

    def open(self, head_sha: str, summary: str = "Waiting to start.") -> None:
        """The check run on `head_sha`, `queued`: the one this job made before (a retry, or while it waited in
        the queue) when there is one, else a new one."""
        self.head_sha = head_sha
        state = self._state("queued", "Queued", summary)
        try:
            self.check_run_id = self.forge.find_check_run(self.repo, head_sha, NAME, self.external_id)
        except Exception as e:  # noqa: BLE001 - as in _create
            self._failed(e)
        if self.check_run_id is None:
            self.check_run_id = self._create(head_sha, state)
        else:
            self._edit(state)

    def wait(self, reason: str) -> None:
        """Say why the job is still queued (its place in the queue) in the summary."""
        self._edit(self._state("queued", "Queued", reason))

    def on_event(self, event: dict[str, Any]) -> None:
        """Take one transcript event: a new phase is the title of the check run, now `in_progress`."""
        if event.get("type") == "phase" and event.get("name") in PHASES:
            self.move(str(event["name"]))

    def move(self, phase: str) -> None:
        """Enter `phase`: the check run is `in_progress`, titled after it."""
        title = PHASES[phase]
        if title != self.title:
            self.title = title
            self._edit(self._state("in_progress", title, f"decode-bot is at work: {title.lower()}."))

    def finish(self, conclusion: Conclusion, redact: Callable[[str], str]) -> None:
        """Complete the check run with `conclusion`; when the job pushed a commit (a new pull request, new
        commits on one), complete one on that new head too."""
        state = completed(conclusion, redact, details_url=self.details_url, external_id=self.external_id)
        self._edit(state)
        pushed = conclusion.result.commit if conclusion.result.branch else None
        if pushed and pushed != self.head_sha:
            self._create(pushed, state)

    def _state(self, status: str, title: str, summary: str) -> CheckRunState:
        return CheckRunState(status, title, summary, details_url=self.details_url, external_id=self.external_id)

    def _create(self, head_sha: str, state: CheckRunState) -> int | None:
        if self.refused:
            return None
        try:
            return self.forge.create_check_run(self.repo, head_sha, NAME, state)
        except Exception as e:  # noqa: BLE001 - the check run is a view; the run goes on whatever it does
            self._failed(e)
            return None

    def _edit(self, state: CheckRunState) -> None:
        if self.refused or self.check_run_id is None:
            return
        try:
            self.forge.edit_check_run(self.repo, self.check_run_id, state)
        except Exception as e:  # noqa: BLE001 - as in _create
            self._failed(e)

    def _failed(self, e: Exception) -> None:
        if isinstance(e, GithubException) and e.status == 403:
            self.refused = True
            said = (e.data or {}).get("message", "") if isinstance(e.data, dict) else ""
            log.warning("no %s check run on %s: the token may not create check runs (403 %s); give the App "
                        "'Checks: write' (or the workflow `checks: write`) to have one", NAME, self.repo, said)
        else:
            log.warning("could not update the %s check run on %s: %s", NAME, self.repo, e)


def outcome(conclusion: Conclusion) -> str:
    """The check run's conclusion: `cancelled` for an interrupted run, `neutral` with nothing to change (or a
    skip), `failure` when the run failed, stopped before it was done or its `verify:` commands still fail,
    else `success`."""
    result = conclusion.result
    if result.stop_reason == "interrupted":
        return "cancelled"
    if result.state in ("no_changes", "skipped"):
        return "neutral"
    if result.state in ("failed", "incomplete") or result.verified == "failed":
        return "failure"
    return "success"


def completed(conclusion: Conclusion, redact: Callable[[str], str], *, details_url: str | None,
              external_id: str) -> CheckRunState:
    """The completed check run: the result's first line and the agent's summary, then the verification and
    the figures. `conclusion.message` is redacted where it is made; the agent's summary is redacted here."""
    result = outcome(conclusion)
    head = conclusion.message.split("\n\n", 1)[0].strip() or conclusion.state
    ran = conclusion.ran
    said = agent_summary(ran, redact) if ran is not None else ""
    title = TITLES[result]
    if result == "failure" and conclusion.result.verified == "failed":
        title = "Verification failed"
    elif result == "failure" and conclusion.state == "incomplete":
        title = "Stopped before done"
    elif conclusion.state == "skipped":
        title = "Skipped"
    text = ""
    if ran is not None:
        figures = ran.result.figures
        text = "\n\n".join(filter(None, [
            verification_text(ran.verification), ran.review.line if ran.review else "",
            restarts_note(ran.result.restarts),
            render_figures(figures, ran.result.stop_reason or "") if figures is not None else ""]))
    return CheckRunState("completed", title, _cap(f"{head}\n\n{said}".strip()), _cap(text), result,
                         details_url=details_url, external_id=external_id)


def verification_text(v: Verification) -> str:
    """The verification as the pull request shows it, then the tail of each failing command's output."""
    tails = [f"**{c.command}** ({c.status}):\n\n{fence(c.tail[-TAIL_CHARS:], 'text')}"
             for c in v.checks if not c.passed and c.tail]
    return "\n\n".join([verification_section(v), *tails])


def _cap(text: str) -> str:
    return text if len(text) <= LIMIT else clip(text, LIMIT - 40) + "\n\n[… cut at GitHub's limit]"


def start_check_run(forge: Forge, work: Work, tag: str, details_url: str | None,
                    summary: str = "Waiting to start.") -> CheckRun:
    """The job's check run, opened `queued` on the pull request's head when the work is on one (a CI fix: on
    the head whose suite failed), its summary `summary` (a waiting job's place in the queue); work on an issue
    has no commit yet, and gets its check run when it pushes."""
    check = CheckRun(forge, work.repo, external_id=check_ref(work, tag), details_url=details_url)
    try:
        if isinstance(work, CheckSuite):
            check.open(work.head_sha, summary)
        elif work.number is not None and getattr(work, "is_pull_request", False):
            check.open(forge.pull(work.repo, work.number).head_sha, summary)
    except Exception as e:  # noqa: BLE001 - the pull request could not be read: the job says so itself
        log.warning("no %s check run on %s#%s: %s", NAME, work.repo, work.number, e)
    return check
