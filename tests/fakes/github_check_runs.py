"""Creating and updating check runs on the fake GitHub, with GitHub's rules.

https://docs.github.com/en/rest/checks/runs#create-a-check-run and #update-a-check-run: only a GitHub App
makes check runs (an installation token with `checks: write`, or Actions' GITHUB_TOKEN, which is the
`github-actions` App's; a personal token gets 403); `head_sha` must be a commit of the repository;
`status` is `queued`, `in_progress` or `completed` (`waiting`, `requested` and `pending` are Actions'
own); a `conclusion` completes the run and `completed` needs one; an `output` needs a title and a summary,
each text at most 65535 characters. Only the App that made a check run may update it.

Every state a run went through is kept in its `history` (status, conclusion, title) for tests.
"""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING, Any

from tests.fakes.github_auth import ApiError, Token
from tests.fakes.github_checks import ACTIONS_APP, NOT_ACCESSIBLE, checks_of, render_check_run
from tests.fakes.github_rest import Result, access, need_token, not_found, now_iso, route
from tests.fakes.github_state import GIT_ENV

if TYPE_CHECKING:
    from tests.fakes.github import FakeGitHub, Repo

STATUSES = ("queued", "in_progress", "completed")
CONCLUSIONS = ("action_required", "cancelled", "failure", "neutral", "success", "skipped", "stale", "timed_out")
OUTPUT_LIMIT = 65_535


def _maker(fake: FakeGitHub, identity: Any) -> str:
    """The slug of the App a credential acts for, when it may write check runs; 403 otherwise."""
    token: Token = need_token(identity)
    if not token.bot:
        raise ApiError(403, "You must authenticate via a GitHub App.")
    limited = token.installation_id is not None or bool(token.permissions)  # a GITHUB_TOKEN with `permissions:`
    if limited and token.permissions.get("checks") != "write":
        raise ApiError(403, NOT_ACCESSIBLE)
    return fake.app.slug if token.installation_id is not None else ACTIONS_APP["slug"]


def _invalid(message: str) -> ApiError:
    return ApiError(422, f"Invalid request.\n\n{message}")


def _fields(body: Any, run: dict | None) -> dict:
    """The check run's fields after `body` is applied to `run` (None: a new one), by GitHub's rules."""
    if not isinstance(body, dict):
        raise _invalid("the body is not a JSON object")
    for key in ("name", "details_url", "external_id", "status", "conclusion"):
        if body.get(key) is not None and not isinstance(body[key], str):
            raise _invalid(f"For 'properties/{key}', {body[key]!r} is not a string.")
    status = body.get("status", run["status"] if run else "queued")
    conclusion = body.get("conclusion", run["conclusion"] if run else None)
    if status not in STATUSES:
        raise _invalid(f"For 'properties/status', {status!r} is not one of {list(STATUSES)}.")
    if conclusion is not None and conclusion not in CONCLUSIONS:
        raise _invalid(f"For 'properties/conclusion', {conclusion!r} is not one of {list(CONCLUSIONS)}.")
    if conclusion == "stale":
        raise _invalid("Only GitHub can set a conclusion of stale.")
    if "conclusion" in body and conclusion is not None:
        status = "completed"  # "Providing conclusion will automatically set the status parameter to completed."
    if status == "completed" and conclusion is None:
        raise ApiError(422, "Validation Failed", [{"resource": "CheckRun", "field": "conclusion", "code": "missing"}])
    output = run["output"] if run else {"title": None, "summary": None, "text": None}
    if "output" in body:
        given = body["output"]
        if not isinstance(given, dict) or not isinstance(given.get("title"), str) \
                or not isinstance(given.get("summary"), str):
            raise _invalid("For 'properties/output', title and summary are required strings.")
        for key in ("title", "summary", "text"):
            if isinstance(given.get(key), str) and len(given[key]) > OUTPUT_LIMIT:
                raise ApiError(422, "Validation Failed", [{"resource": "CheckRun", "field": f"output.{key}",
                                                           "code": "custom", "message": "is too long"}])
        output = {"title": given["title"], "summary": given["summary"], "text": given.get("text")}
    return {"status": status, "conclusion": conclusion if status == "completed" else None, "output": output,
            **{k: body[k] for k in ("name", "details_url", "external_id") if k in body}}


def _has_commit(repo: Repo, sha: str) -> bool:
    done = subprocess.run(["git", "cat-file", "-e", f"{sha}^{{commit}}"], cwd=repo.path, env=GIT_ENV,
                          capture_output=True)
    return done.returncode == 0


@route("POST", "{o_r}/check-runs")
def create_check_run(fake, request, identity, owner, name) -> Result:
    repo = access(fake, identity, owner, name)
    app = _maker(fake, identity)
    body = request.body
    if not isinstance(body, dict) or not isinstance(body.get("name"), str) or not body["name"]:
        raise _invalid("For 'properties/name', a non-empty string is required.")
    sha = body.get("head_sha")
    if not isinstance(sha, str) or not _has_commit(repo, sha):
        raise ApiError(422, f"No commit found for SHA: {sha}")
    fields = _fields(body, None)
    state = checks_of(fake)
    suite_id = next((i for i, s in state.suites.items()
                     if (s["repo"], s["head_sha"], s["app"]) == (repo.full_name.lower(), sha, app)), None)
    if suite_id is None:
        suite_id = fake.next_id()
        state.suites[suite_id] = {"repo": repo.full_name.lower(), "head_sha": sha, "app": app,
                                  "head_branch": None, "run_id": fake.next_id()}
    run_id = fake.next_id()
    run = {"id": run_id, "repo": repo.full_name.lower(), "head_sha": sha, "suite": suite_id, "log": None,
           "log_ranges": True, "app": app, "details_url": None, "external_id": None, "started_at": now_iso(),
           "completed_at": None, "history": [], **fields}
    _settle(run)
    state.runs[run_id] = run
    return 201, render_check_run(fake, run), {}


@route("PATCH", r"{o_r}/check-runs/(?P<rid>\d+)")
def update_check_run(fake, request, identity, owner, name, rid) -> Result:
    repo = access(fake, identity, owner, name)
    app = _maker(fake, identity)
    run = checks_of(fake).runs.get(int(rid))
    if run is None or run["repo"] != repo.full_name.lower():
        raise not_found()
    if run["app"] != app:
        raise ApiError(403, "Invalid app_id `%s` - check run can only be modified by the GitHub App that "
                            "created it." % app)
    run.update(_fields(request.body, run))
    _settle(run)
    return 200, render_check_run(fake, run), {}


def _settle(run: dict) -> None:
    """Stamp completion and record the state in the run's history."""
    if run["status"] == "completed" and run["completed_at"] is None:
        run["completed_at"] = now_iso()
    run["history"].append((run["status"], run["conclusion"], run["output"]["title"]))


def decode_runs(fake: FakeGitHub, owner: str, repo: str) -> list[dict]:
    """The `decode-bot` check runs made on owner/repo, oldest first."""
    full = f"{owner}/{repo}".lower()
    return sorted((r for r in checks_of(fake).runs.values() if r["repo"] == full and r["name"] == "decode-bot"),
                  key=lambda r: r["id"])
