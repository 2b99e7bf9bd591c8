"""Check runs, check suites and Actions job logs of the fake GitHub.

Shapes follow https://docs.github.com/en/rest/checks/runs, .../rest/checks/suites and
.../rest/actions/workflow-jobs#download-job-logs-for-a-workflow-run. Check runs are grouped into one
suite per (repository, head commit, app), as GitHub groups them. A GitHub Actions check run is also a
workflow job with the same id (the job object's `check_run_url` names it), and its `details_url`
and `html_url` point at `/actions/runs/{run_id}/job/{job_id}`.

The job log answers 302 to a signed URL on another host that expires after a minute, as GitHub does;
that host (`LOG_HOST`, one per test process, on its own port) serves the text without any credential
and records every request it got, so a test can check that no token followed the redirect.

Arrange with `add_check_run(fake, ...)`; the state lives on the fake as `fake.checks` (`checks_of`).
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

from tests.fakes.github_auth import ApiError, Token
from tests.fakes.github_rest import (
    Result, access, node_id, not_found, now_iso, paginate, render_repo, render_user, route,
)
from tests.fakes.http import start_server

if TYPE_CHECKING:
    from tests.fakes.github import FakeGitHub, Repo

ACTIONS_APP = {"id": 15368, "slug": "github-actions", "name": "GitHub Actions", "owner": "github"}
LOG_URL_LIFETIME = 60  # seconds: "This link expires after 1 minute."
NOT_ACCESSIBLE = "Resource not accessible by integration"


@dataclass
class ChecksState:
    """Every check run the fake knows, by id, and the suites grouping them."""

    runs: dict[int, dict] = field(default_factory=dict)
    suites: dict[int, dict] = field(default_factory=dict)  # id -> repo, head_sha, head_branch, app
    log_requests: list[LogRequest] = field(default_factory=list)  # what the log host got for this fake's logs


def checks_of(fake: FakeGitHub) -> ChecksState:
    """The fake's check state, made on first use."""
    with fake.lock:
        if not isinstance(getattr(fake, "checks", None), ChecksState):
            fake.checks = ChecksState()  # type: ignore[attr-defined]
        return fake.checks  # type: ignore[attr-defined]


def add_check_run(fake: FakeGitHub, owner: str, repo: str, head_sha: str, name: str, conclusion: str | None, *,
                  title: str | None = None, summary: str | None = None, text: str | None = None,
                  log: str | None = None, app: str = "github-actions", details_url: str | None = None,
                  head_branch: str | None = None, log_ranges: bool = True) -> int:
    """A check run on `head_sha` (a completed one unless `conclusion` is None); returns its id.

    `app` is the slug of the App that made it: "github-actions" makes it a workflow job too, whose
    log is `log` (None: GitHub answers 410, as for a log that was deleted or expired). With
    `log_ranges` False the log host answers a Range request with the whole log (200).
    """
    state, r = checks_of(fake), fake.repo(owner, repo)
    with fake.lock:
        suite_id = next((i for i, s in state.suites.items()
                         if (s["repo"], s["head_sha"], s["app"]) == (r.full_name.lower(), head_sha, app)), None)
        if suite_id is None:
            suite_id = fake.next_id()
            state.suites[suite_id] = {"repo": r.full_name.lower(), "head_sha": head_sha, "app": app,
                                      "head_branch": head_branch, "run_id": fake.next_id()}
        run_id = fake.next_id()
        state.runs[run_id] = {
            "id": run_id, "repo": r.full_name.lower(), "head_sha": head_sha, "name": name, "suite": suite_id,
            "status": "in_progress" if conclusion is None else "completed", "conclusion": conclusion,
            "output": {"title": title, "summary": summary, "text": text}, "log": log, "app": app,
            "log_ranges": log_ranges,
            "details_url": details_url, "started_at": now_iso(),
            "completed_at": None if conclusion is None else now_iso()}
        return run_id


def _app(fake: FakeGitHub, slug: str) -> dict:
    known = ACTIONS_APP if slug == ACTIONS_APP["slug"] else {
        "id": 900_000 + sum(map(ord, slug)), "slug": slug, "name": slug, "owner": slug}
    return {"id": known["id"], "slug": known["slug"], "node_id": node_id("App", known["id"]),
            "name": known["name"], "owner": render_user(fake, known["owner"]), "description": "",
            "external_url": f"{fake.web_url}/apps/{known['slug']}", "html_url": f"{fake.web_url}/apps/{known['slug']}",
            "created_at": "2024-01-01T00:00:00Z", "updated_at": "2024-01-01T00:00:00Z", "permissions": {},
            "events": []}


def render_check_run(fake: FakeGitHub, run: dict) -> dict:
    repo = fake.repos[run["repo"]]
    api, web = f"{fake.api_url}/repos/{repo.full_name}", f"{fake.web_url}/{repo.full_name}"
    suite = checks_of(fake).suites[run["suite"]]
    if "history" in run:  # made through the API (tests/fakes/github_check_runs.py): its own fields
        html_url, details_url, external_id = f"{web}/runs/{run['id']}", run["details_url"], run["external_id"]
    elif run["app"] == ACTIONS_APP["slug"]:
        html_url = details_url = f"{web}/actions/runs/{suite['run_id']}/job/{run['id']}"
        external_id = f"{suite['run_id']:x}-{run['id']:x}"  # an opaque id of Actions' own, not the job id
    else:
        html_url, details_url, external_id = f"{web}/runs/{run['id']}", run["details_url"], str(run["id"])
    output = run["output"]
    return {"id": run["id"], "node_id": node_id("CheckRun", run["id"]), "head_sha": run["head_sha"],
            "name": run["name"], "external_id": external_id, "url": f"{api}/check-runs/{run['id']}",
            "html_url": html_url, "details_url": details_url, "status": run["status"],
            "conclusion": run["conclusion"], "started_at": run["started_at"], "completed_at": run["completed_at"],
            "output": {**output, "annotations_count": 0,
                       "annotations_url": f"{api}/check-runs/{run['id']}/annotations"},
            "check_suite": {"id": run["suite"]}, "app": _app(fake, run["app"]), "pull_requests": []}


def render_check_suite(fake: FakeGitHub, suite_id: int) -> dict:
    suite, state = checks_of(fake).suites[suite_id], checks_of(fake)
    repo = fake.repos[suite["repo"]]
    runs = [r for r in state.runs.values() if r["suite"] == suite_id]
    done = all(r["status"] == "completed" for r in runs)
    conclusions = [r["conclusion"] for r in runs]
    worst = next((c for c in ("failure", "timed_out", "action_required", "cancelled") if c in conclusions), "success")
    api = f"{fake.api_url}/repos/{repo.full_name}"
    return {"id": suite_id, "node_id": node_id("CheckSuite", suite_id), "head_branch": suite["head_branch"],
            "head_sha": suite["head_sha"], "status": "completed" if done else "in_progress",
            "conclusion": worst if done else None, "url": f"{api}/check-suites/{suite_id}", "before": None,
            "after": suite["head_sha"], "pull_requests": [], "app": _app(fake, suite["app"]),
            "repository": render_repo(fake, repo), "created_at": now_iso(), "updated_at": now_iso(),
            "latest_check_runs_count": len(runs), "check_runs_url": f"{api}/check-suites/{suite_id}/check-runs",
            "rerequestable": True, "runs_rerequestable": True}


def _need(identity: Any, permission: str) -> None:
    """An installation token needs the App's `permission` (read or write); other tokens are not limited here.
    (https://docs.github.com/en/rest/authentication/permissions-required-for-github-apps)"""
    if isinstance(identity, Token) and identity.installation_id is not None \
            and identity.permissions.get(permission) not in ("read", "write"):
        raise ApiError(403, NOT_ACCESSIBLE)


def _listed(fake: FakeGitHub, request, runs: list[dict]) -> Result:
    """GitHub's check run list: filter `latest` (default: the newest run of each name) or `all`, check_name,
    status and app_id, then one page of `{"total_count", "check_runs"}`."""
    query = request.query
    if query.get("filter", "latest") not in ("latest", "all"):
        raise ApiError(422, "Invalid request.\n\nfilter is not included in the list")
    runs = sorted(runs, key=lambda r: r["id"], reverse=True)
    if query.get("filter", "latest") == "latest":
        newest: dict[str, dict] = {}
        for run in runs:
            newest.setdefault(run["name"], run)
        runs = list(newest.values())
    if "check_name" in query:
        runs = [r for r in runs if r["name"] == query["check_name"]]
    if "status" in query:
        runs = [r for r in runs if r["status"] == query["status"]]
    if "app_id" in query:
        runs = [r for r in runs if _app(fake, r["app"])["id"] == int(query["app_id"])]
    status, page, headers = paginate(fake, request, [render_check_run(fake, r) for r in runs])
    return status, {"total_count": len(runs), "check_runs": page}, headers


def _resolve(fake: FakeGitHub, repo: Repo, ref: str) -> str:
    """A SHA, branch or tag name, as the check run list takes it, to a commit SHA (422 otherwise)."""
    if re.fullmatch(r"[0-9a-f]{40}", ref):
        return ref
    try:
        return fake.branch_sha(repo.owner, repo.name, ref.removeprefix("heads/"))
    except KeyError:
        raise ApiError(422, f"No commit found for SHA: {ref}") from None


@route("GET", "{o_r}/commits/(?P<ref>.+)/check-runs")
def list_check_runs_for_ref(fake, request, identity, owner, name, ref) -> Result:
    repo = access(fake, identity, owner, name)
    _need(identity, "checks")
    sha = _resolve(fake, repo, ref)
    state = checks_of(fake)
    return _listed(fake, request, [r for r in state.runs.values()
                                   if (r["repo"], r["head_sha"]) == (repo.full_name.lower(), sha)])


def _owned(fake: FakeGitHub, identity: Any, owner: str, name: str, items: dict[int, dict], key: str) -> dict:
    """The suite or run `key` of owner/name, as the credential may read checks there; 404 otherwise."""
    repo = access(fake, identity, owner, name)
    _need(identity, "checks")
    item = items.get(int(key))
    if item is None or item["repo"] != repo.full_name.lower():
        raise not_found()
    return item


@route("GET", r"{o_r}/check-suites/(?P<sid>\d+)")
def get_check_suite(fake, request, identity, owner, name, sid) -> Result:
    _owned(fake, identity, owner, name, checks_of(fake).suites, sid)
    return 200, render_check_suite(fake, int(sid)), {}


@route("GET", r"{o_r}/check-suites/(?P<sid>\d+)/check-runs")
def list_check_runs_in_suite(fake, request, identity, owner, name, sid) -> Result:
    get_check_suite(fake, request, identity, owner, name, sid)
    return _listed(fake, request, [r for r in checks_of(fake).runs.values() if r["suite"] == int(sid)])


@route("GET", r"{o_r}/check-runs/(?P<rid>\d+)")
def get_check_run(fake, request, identity, owner, name, rid) -> Result:
    return 200, render_check_run(fake, _owned(fake, identity, owner, name, checks_of(fake).runs, rid)), {}


@route("GET", r"{o_r}/actions/jobs/(?P<jid>\d+)/logs")
def download_job_logs(fake, request, identity, owner, name, jid) -> Result:
    """302 to a signed URL on the log host; 404 for an id that is not an Actions job (another App's check run),
    410 when the job has no log."""
    repo = access(fake, identity, owner, name)
    _need(identity, "actions")
    run = checks_of(fake).runs.get(int(jid))
    if run is None or run["repo"] != repo.full_name.lower() or run["app"] != ACTIONS_APP["slug"]:
        raise not_found()
    if run["log"] is None:
        raise ApiError(410, "The logs for this job have expired or were deleted.")
    return 302, None, {"location": LOG_HOST.sign(run["log"], checks_of(fake).log_requests, ranges=run["log_ranges"])}


# -- the log host: another server, no credentials, signed URLs -------------------------------------------------
@dataclass
class LogRequest:
    """One request the log host got: path, headers (lower-cased names) and the status it answered."""

    path: str
    headers: dict[str, str]
    status: int = 0


class LogHost:
    """Serves each signed log URL for `LOG_URL_LIFETIME` seconds, answering `Range: bytes=a-b` / `bytes=-n` with
    206 as blob stores do (unless signed with `ranges=False`); an unknown or expired signature is a 403."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        # signature -> (content, expiry, whether Range is honoured, where its requests are recorded)
        self.blobs: dict[str, tuple[bytes, float, bool, list[LogRequest]]] = {}
        self._server: ThreadingHTTPServer | None = None

    def url(self) -> str:
        """The host's root, serving from the first call on (with the fake GitHub's request handler)."""
        from tests.fakes.github import _Handler  # github.py imports this module to register its routes
        with self.lock:
            if self._server is None:
                self._server = start_server(_Handler, self)
            return f"http://127.0.0.1:{self._server.server_address[1]}"

    def sign(self, text: str, sink: list[LogRequest], *, ranges: bool = True) -> str:
        """A fresh URL serving `text` for a minute; the requests for it are appended to `sink`."""
        signature = secrets.token_urlsafe(24)
        with self.lock:
            self.blobs[signature] = (text.encode(), time.time() + LOG_URL_LIFETIME, ranges, sink)
        return f"{self.url()}/logs/signedlogcontent?urlSigningMethod=HMACV1&urlSignature={signature}"

    def handle(self, method: str, target: str, headers: dict[str, str], raw: bytes) -> tuple[int, dict, bytes]:
        """(status, headers, body) for one request; only GET and HEAD are served, as on a blob store."""
        if method not in ("GET", "HEAD"):
            return 405, {"content-type": "text/plain"}, b"UnsupportedHttpVerb\n"
        url = urlsplit(target)
        signature = dict(parse_qsl(url.query)).get("urlSignature", "")
        record = LogRequest(url.path, headers)
        with self.lock:
            content, expiry, ranges, sink = self.blobs.get(signature, (b"", 0.0, False, []))
            sink.append(record)
        if url.path != "/logs/signedlogcontent" or expiry < time.time():
            record.status = 403
            return 403, {"content-type": "text/plain"}, b"AuthenticationFailed: Signature not valid or expired\n"
        record.status, out, extra = 200, content, {}
        match = re.fullmatch(r"bytes=(\d*)-(\d*)", headers.get("range", "").strip())
        if match and ranges and content and any(match.groups()):
            first, last = match.groups()
            start = max(0, len(content) - int(last)) if not first else int(first)
            end = len(content) - 1 if not first or not last else min(int(last), len(content) - 1)
            out = content[start:end + 1]
            record.status, extra = 206, {"content-range": f"bytes {start}-{end}/{len(content)}"}
        return record.status, {"content-type": "text/plain; charset=utf-8", **extra}, out


LOG_HOST = LogHost()
