"""What failed in CI on a pull request's head, read through GitHub's API for a CI-fix run (decode.yml `ci_fix`).

`failed_checks` reads the check runs of the head commit
(https://docs.github.com/en/rest/checks/runs#list-check-runs-for-a-git-reference, newest run of each
name) and keeps the failing ones with their output; for a GitHub Actions run it adds the tail of the
job's log. `CommitIdentity` is a commit's author and committer as GitHub lists them. The task made of
the failures is bot/github/task_text.py's `ci_task_text`; the rules over commit identities are the plan's
(bot/github/plan.py). This module is the GitHub edge's: it imports nothing of the run layer.

decode-bot's own check run (`decode-bot`) is never one of them: a fix of the code is not a fix of a run.

Which conclusions fail (`bot.github.triggers.FAILED_SUITES`, the same rule as for a suite): `failure`,
`timed_out`, and `startup_failure` (a workflow that could not start, which GitHub reports on suites and workflow runs). Not `cancelled`: a person or a newer push
cancelled it, and a matrix cancels its other legs when one fails, which is reported on its own.
Not `action_required`: someone must approve or act on GitHub, which no commit does. `neutral`,
`skipped`, `stale` and `success` pass; a run still in progress has no conclusion and is not read.

Actions logs: an Actions job's id is its check run's id (the job object's `check_run_url` names it),
and its `details_url` is `.../actions/runs/{run_id}/job/{job_id}`. `GET .../actions/jobs/{id}/logs`
answers 302 with a signed URL on another host that expires after a minute
(https://docs.github.com/en/rest/actions/workflow-jobs#download-job-logs-for-a-workflow-run); the
URL is fetched with a plain request that carries no GitHub credential, asking for the tail only
(`Range: bytes=-N`). The App needs `Checks: read` and `Actions: read`.

Callers run `failed_checks` under the forge's retry policy: GitHub's transient errors are raised;
a log that cannot be had (no permission, expired) is an observation in `CheckFailure.log_problem`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import requests
from github import GithubException

from bot.github.retry import is_transient
from bot.github.triggers import FAILED_SUITES
from bot.github.work import CHECK_NAME

ACTIONS_APP = "github-actions"  # the slug of the App that makes GitHub Actions' check runs
LOG_LINES = 200
LOG_CHARS = 12_000
MAX_CHECKS = 10
MAX_LOGS = 5
SECRET_MARGIN = 8_192  # bytes read beyond the tail, so a secret across the cut is whole when redacted
MAX_DOWNLOAD = 64 * 1024 * 1024  # of a log served whole (no Range support)
LOG_TIMEOUT_S = 30.0
_JOB_URL = re.compile(r"/actions/runs/\d+/job/(\d+)(?:[/?#]|$)")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z ", re.MULTILINE)  # Actions' line prefix


@dataclass(frozen=True)
class CheckFailure:
    """One failing check run: GitHub's fields as it gave them (the log tail already redacted and cut)."""

    name: str
    conclusion: str
    title: str
    summary: str
    text: str
    log_tail: str  # the end of the Actions job's log; "" for other Apps' checks or when it could not be had
    url: str  # the check run's page on GitHub
    log_problem: str = ""  # why an Actions log is missing, in our words


@dataclass(frozen=True)
class FailedChecks:
    """The failing checks kept (at most `max_checks`) and how many more failed."""

    failures: tuple[CheckFailure, ...]
    left_out: int = 0

    def __iter__(self) -> Iterator[CheckFailure]:
        return iter(self.failures)

    def __len__(self) -> int:
        return len(self.failures)


def failed_checks(gh_repo: Any, head_sha: str, *, redact: Callable[[str], str], log_lines: int = LOG_LINES,
                  max_chars: int = LOG_CHARS, max_checks: int = MAX_CHECKS, max_logs: int = MAX_LOGS,
                  session: requests.Session | None = None, timeout: float = LOG_TIMEOUT_S) -> FailedChecks:
    """The failing check runs of `head_sha` in `gh_repo` (a PyGithub `Repository`), sorted by name.

    At most `max_checks` are kept; the log tails of at most `max_logs` Actions jobs are fetched, each at
    most `log_lines` lines and `max_chars` characters, redacted before it is cut. `session` makes the
    log download (a plain one by default).
    """
    failing = sorted((run for run in gh_repo.get_commit(head_sha).get_check_runs(filter="latest")
                      if run.status == "completed" and run.conclusion in FAILED_SUITES
                      and run.name != CHECK_NAME), key=lambda r: (r.name, r.id))
    kept: list[CheckFailure] = []
    logs = 0
    for run in failing[:max_checks]:
        output = run.output
        log, problem = "", ""
        job_id = actions_job_id(run)
        if job_id is not None and logs < max_logs:
            logs += 1
            log, problem = job_log_tail(gh_repo, job_id, redact=redact, log_lines=log_lines, max_chars=max_chars,
                                         session=session, timeout=timeout)
        elif job_id is not None:
            problem = f"its log was not read: only the first {max_logs} failing jobs' logs are"
        kept.append(CheckFailure(run.name or "", run.conclusion, getattr(output, "title", None) or "",
                                 getattr(output, "summary", None) or "", getattr(output, "text", None) or "",
                                 log, run.html_url or "", problem))
    return FailedChecks(tuple(kept), max(0, len(failing) - max_checks))


def actions_job_id(run: Any) -> int | None:
    """The Actions job behind a check run, or None when another App made it.

    The job id is in the run's `details_url` (`.../actions/runs/{run_id}/job/{job_id}`); it is also the
    check run's own id, which stands in when that URL has another shape.
    """
    app = run.app
    if app is None or (app.slug or "") != ACTIONS_APP:
        return None
    found = _JOB_URL.search(run.details_url or "")
    return int(found.group(1)) if found else int(run.id)


def job_log_tail(gh_repo: Any, job_id: int, *, redact: Callable[[str], str], log_lines: int = LOG_LINES,
                 max_chars: int = LOG_CHARS, session: requests.Session | None = None,
                 timeout: float = LOG_TIMEOUT_S) -> tuple[str, str]:
    """(the redacted tail of Actions job `job_id`'s log, "") or ("", why it could not be had).

    GitHub's 302 is not followed by PyGithub here (`logs_url` reads its Location); the signed URL is then
    fetched without the installation token, which must never reach the log host.
    """
    try:
        location = gh_repo.get_workflow_job(job_id).logs_url()
    except GithubException as e:
        if is_transient(e):
            raise
        return "", _refusal(e.status, job_id)
    if not re.match(r"https?://", location or ""):
        return "", f"GitHub gave no download address for the log of job {job_id}"
    want = max_chars * 4 + SECRET_MARGIN  # up to 4 bytes a character
    try:
        raw, whole = _download_tail(session.get if session is not None else requests.get, location, want, timeout)
    except requests.RequestException as e:
        return "", f"the log of job {job_id} could not be downloaded ({type(e).__name__})"
    except _Unreadable as e:
        return "", f"the log of job {job_id} {e}"
    text = raw.decode("utf-8", "replace")
    if not whole:  # the first line was cut in the middle
        text = text.split("\n", 1)[1] if "\n" in text else ""
    text = redact(_STAMP.sub("", _ANSI.sub("", text.replace("\r\n", "\n"))))
    return tail(text, lines=log_lines, chars=max_chars), ""


def _refusal(status: int, job_id: int) -> str:
    if status == 403:
        return (f"GitHub refused the log of job {job_id} ({status}): give the GitHub App the 'Actions: read' "
                "permission (or the token read access to Actions)")
    if status in (404, 410):
        return f"GitHub has no log for job {job_id} ({status}): it expired or was deleted"
    return f"GitHub answered {status} for the log of job {job_id}"


class _Unreadable(Exception):
    """The log host answered, but not with the log's end; the message completes "the log of job N ..."."""


def _download_tail(get: Callable[..., requests.Response], url: str, want: int,
                   timeout: float) -> tuple[bytes, bool]:
    """(the last `want` bytes at `url`, whether they are the whole content). A host that ignores `Range` is
    read through, keeping only the end; one whose log passes `MAX_DOWNLOAD` bytes that way is `_Unreadable`."""
    with get(url, headers={"Range": f"bytes=-{want}"}, stream=True, timeout=timeout, allow_redirects=True) as answer:
        if answer.status_code == 416:  # an empty log
            return b"", True
        if answer.status_code not in (200, 206):
            raise _Unreadable(f"could not be downloaded: the log host answered {answer.status_code} (expired?)")
        kept = bytearray()
        seen = 0
        for chunk in answer.iter_content(64 * 1024):
            seen += len(chunk)
            kept += chunk
            del kept[:-want]
            if seen > MAX_DOWNLOAD:
                raise _Unreadable(f"is over {MAX_DOWNLOAD // 2**20} MB and its host does not serve the end alone")
        total = re.search(r"/(\d+)$", answer.headers.get("content-range", ""))
        size = int(total.group(1)) if total and answer.status_code == 206 else seen
        return bytes(kept), len(kept) >= size


def tail(text: str, *, lines: int, chars: int) -> str:
    """The end of `text`: at most `lines` lines and `chars` characters, starting at a line when it can."""
    kept = "\n".join(text.rstrip("\n").split("\n")[-lines:]) if lines > 0 else ""
    if len(kept) > chars:
        kept = kept[-chars:]
        kept = kept.split("\n", 1)[1] if "\n" in kept[:-1] else kept
    return kept


@dataclass(frozen=True)
class CommitIdentity:
    """Who made a commit, as git records it (author and committer); GitHub does not vouch for either."""

    sha: str
    author: tuple[str, str]  # (name, email)
    committer: tuple[str, str]
    subject: str = ""  # the first line of the message

    @classmethod
    def of(cls, commit: dict) -> CommitIdentity:
        """From a webhook `head_commit`/`commits[]` entry (`id`, `author`, `committer`) or a REST commit
        (`sha`, `commit.author`, `commit.committer`)."""
        nested = commit.get("commit")
        inner: dict = nested if isinstance(nested, dict) else commit

        def person(key: str) -> tuple[str, str]:
            who = inner.get(key) or {}
            return str(who.get("name") or ""), str(who.get("email") or "")
        subject = str(inner.get("message") or "").split("\n", 1)[0]
        return cls(str(commit.get("sha") or commit.get("id") or ""), person("author"), person("committer"), subject)
