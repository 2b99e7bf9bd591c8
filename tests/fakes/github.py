"""A stateful fake GitHub on 127.0.0.1: REST under `/api/v3` (as on GitHub Enterprise) and git smart HTTP.

PyGithub talks to `fake.api_url`; git clones and pushes `fake.git_url(owner, repo)`
through `git http-backend`. Credentials are checked as GitHub checks them
(`github_auth`), every REST request is checked against GitHub's own OpenAPI
description (`openapi`): a request for an endpoint GitHub does not have is
answered 404 and fails the test at teardown. Endpoints live in `github_rest` (the App manifest flow,
its web page included, in `github_manifest`; an issue's and a pull request's page in `github_web`).
"""

from __future__ import annotations

import json
import math
import re
import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from tests.fakes.http import start_server, stop_server
from tests.fakes.pause import Pause
from tests.fakes import github_rest as rest
from tests.fakes import github_rest_issues  # noqa: F401  (registers the issue, comment and pull routes)
from tests.fakes import github_rest_reviews  # noqa: F401  (registers the review and contents routes)
from tests.fakes import github_checks  # noqa: F401  (registers the check run, check suite and job log routes)
from tests.fakes import github_git_data  # noqa: F401  (registers the Git Database routes: blobs, trees, commits, refs)
from tests.fakes import github_check_runs  # noqa: F401  (registers creating and updating check runs)
from tests.fakes import github_oauth  # the OAuth web flow; registers the user-token routes
from tests.fakes import github_manifest
from tests.fakes.github_hooks import Hooks  # registers the App webhook's deliveries routes
from tests.fakes import github_web  # an issue's and a pull request's web page
from tests.fakes.git_http import http_backend, pushed_refs
from tests.fakes.github_auth import ApiError
from tests.fakes.github_state import GitHubState
from tests.fakes.openapi import OpenApiRoutes, OpenApiUnavailable, load_routes

API_PREFIX = "/api/v3"
GIT_PATH = re.compile(r"^/([^/]+)/([^/]+?)\.git/(info/refs|git-upload-pack|git-receive-pack)$")
SECONDARY_RATE_LIMIT = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out "
    "to GitHub Support for help, please include the request ID ABCD:1234."
)
SECONDARY_DOCS = "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits"
WRITES = {"POST", "PATCH", "PUT", "DELETE"}


@dataclass
class Request:
    """One request as the fake saw it: `path` has no API prefix; `body` is the parsed JSON (REST)."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any
    kind: str = "rest"  # "rest", "git" or "other"
    status: int = 0
    at: float = field(default_factory=time.monotonic)  # when it arrived


@dataclass
class Fault:
    method: str
    pattern: re.Pattern[str]
    status: int
    times: int
    headers: dict[str, Any]
    apply: bool
    body: Any


class FakeGitHub(GitHubState):
    """The fake: `start()`, add repos, users, issues and pulls, point PyGithub and git at it."""

    def __init__(self, routes: OpenApiRoutes | None = None, *, app_id: int = 424242) -> None:
        super().__init__(app_id)
        self.routes = routes if routes is not None else load_routes()
        self.requests: list[Request] = []
        self.unknown: list[str] = []  # "METHOD /path": not in GitHub's OpenAPI description
        self.unhandled: list[str] = []  # in GitHub's description, but this fake does not serve it
        self.faults: list[Fault] = []
        self.pauses: list[tuple[str, re.Pattern[str], Pause]] = []
        self.manifests: list[dict] = []  # every App manifest POSTed to /settings/apps/new (github_manifest)
        self.created_apps: list[dict] = []  # every App created from one: id, slug, owner
        self.hooks = Hooks()  # the App's webhook: where it delivers, and every delivery (github_hooks)
        self.latency_s = 0.0  # added to every request's answer: a round trip to a distant GitHub
        self.write_limit: tuple[int, float] | None = None  # (writes, seconds) per identity: `limit_writes`
        self._writes: dict[str, list[float]] = {}
        self._server: ThreadingHTTPServer | None = None

    # -- lifecycle ---------------------------------------------------------------------------------------
    def start(self) -> "FakeGitHub":
        """Serve on a free port in a background thread."""
        self._server = start_server(_Handler, self)
        return self

    def stop(self) -> None:
        """Stop serving and delete the bare repositories."""
        if self._server is not None:
            stop_server(self._server)
            self._server = None
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "FakeGitHub":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def web_url(self) -> str:
        """The server root, like https://github.com (html_url and git remotes live here)."""
        assert self._server is not None, "the fake GitHub is not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def api_url(self) -> str:
        """PyGithub's `base_url` / GITHUB_API_URL."""
        return self.web_url + API_PREFIX

    def calls(self, method: str = ".*", path: str = ".*") -> list[Request]:
        """Requests whose method and path (no API prefix) match the regexes."""
        return [r for r in self.requests if re.fullmatch(method, r.method) and re.search(path, r.path)]

    # -- fault injection -----------------------------------------------------------------------------------
    def inject(self, method: str, path_regex: str, status: int = 502, *, times: int = 1,
               headers: dict[str, Any] | None = None, apply: bool = False, body: Any = None) -> None:
        """The next `times` requests matching (method, path regex searched in the path without the API
        prefix) answer `status`. With apply=True the request takes effect first. Header values may be
        callables, evaluated when the fault is served."""
        default = {"message": "Server Error"} if status >= 500 else {"message": f"HTTP {status}"}
        self.faults.append(Fault(method.upper(), re.compile(path_regex), status, times, headers or {}, apply,
                                 body if body is not None else default))

    def inject_secondary_rate_limit(self, method: str, path_regex: str, *, times: int = 1, apply: bool = False,
                                    retry_after: int = 1) -> None:
        """403 with GitHub's secondary rate limit message and Retry-After
        (https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api)."""
        self.inject(method, path_regex, 403, times=times, apply=apply, headers={"retry-after": str(retry_after)},
                    body={"message": SECONDARY_RATE_LIMIT, "documentation_url": SECONDARY_DOCS})

    def inject_primary_rate_limit(self, method: str, path_regex: str, *, times: int = 1, status: int = 403,
                                  reset_in: int = 1) -> None:
        """403 (or 429) "API rate limit exceeded" with x-ratelimit-remaining 0 and a reset `reset_in` s ahead."""
        headers = {"x-ratelimit-remaining": "0", "x-ratelimit-limit": "5000", "x-ratelimit-used": "5000",
                   "x-ratelimit-resource": "core", "x-ratelimit-reset": lambda: str(math.ceil(time.time()) + reset_in)}
        self.inject(method, path_regex, status, times=times, headers=headers, body={
            "message": f"API rate limit exceeded for installation ID {self.installation_id}.",
            "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"})

    def limit_writes(self, count: int = 80, per_s: float = 60.0) -> None:
        """Enforce GitHub's secondary limit on content-creating requests: past `count` writes (POST, PATCH, PUT,
        DELETE) by one identity within `per_s` seconds, a write is refused 403 with `retry-after` saying when
        the window frees, as GitHub does (80 a minute; https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits)."""
        self.write_limit = (count, per_s)

    def writes(self) -> list[Request]:
        """The content-creating REST requests made (POST, PATCH, PUT, DELETE), refused ones included."""
        return [r for r in self.requests if r.kind == "rest" and r.method in WRITES]

    def _over_write_limit(self, request: Request) -> float | None:
        """Seconds to wait when `request` is a write past `write_limit`; None when it may go (and it is counted)."""
        if self.write_limit is None or request.method not in WRITES:
            return None
        count, per_s = self.write_limit
        who = request.headers.get("authorization", "")
        try:
            who = self.authenticate(who).login
        except (ApiError, AttributeError):
            pass
        now = time.monotonic()
        with self.lock:
            recent = [t for t in self._writes.get(who, []) if t > now - per_s]
            if len(recent) >= count:
                self._writes[who] = recent
                return recent[0] + per_s - now
            self._writes[who] = recent + [now]
        return None

    def pause(self, method: str, path_regex: str) -> Pause:
        """Hold the next REST request matching (method, path regex) until released; a dropped one has no effect."""
        pause = Pause()
        with self.lock:
            self.pauses.append((method.upper(), re.compile(path_regex), pause))
        return pause

    def _take_pause(self, method: str, path: str) -> Pause | None:
        with self.lock:
            for m, pattern, pause in self.pauses:
                if pause.active and not pause.reached.is_set() and m == method and pattern.search(path):
                    return pause
        return None

    def _take_fault(self, method: str, path: str) -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if fault.times > 0 and fault.method in (method, "*") and fault.pattern.search(path):
                    fault.times -= 1
                    return fault
        return None

    # -- serving -------------------------------------------------------------------------------------------
    def handle(self, method: str, target: str, headers: dict[str, str], raw: bytes) -> tuple[int, dict, bytes]:
        """Answer one HTTP request: (status, headers, body bytes)."""
        url = urlsplit(target)
        query = dict(parse_qsl(url.query, keep_blank_values=True))
        git_match = GIT_PATH.match(url.path)
        if git_match:
            request = Request(method, url.path, query, headers, None, "git")
        else:
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode("utf-8", "replace")
            path = url.path[len(API_PREFIX):] if url.path.startswith(API_PREFIX + "/") else url.path
            request = Request(method, path, query, headers, body, "rest" if path != url.path else "other")
        with self.lock:
            self.requests.append(request)
        if self.latency_s:
            time.sleep(self.latency_s)
        pause = None if git_match else self._take_pause(method, request.path)
        if pause is not None and pause.hold():
            request.status = -1
            raise ConnectionAbortedError("paused request dropped")
        if git_match:
            status, out_headers, payload = self._serve_git(request, git_match, target, raw)
        elif (web := github_oauth.serve_web(self, request) or github_web.page(self, request)) is not None:
            status, out_headers, payload = web
        else:
            status, out_headers, data = self._serve_rest(request)
            payload = b"" if data is None else json.dumps(data).encode()
            out_headers.setdefault("content-type", "application/json; charset=utf-8")
        request.status = status
        return status, out_headers, payload

    def _serve_rest(self, request: Request) -> tuple[int, dict, Any]:
        headers = {"x-github-request-id": uuid.uuid4().hex[:16].upper(), "x-ratelimit-limit": "5000",
                   "x-ratelimit-remaining": "4999", "x-ratelimit-used": "1", "x-ratelimit-resource": "core",
                   "x-ratelimit-reset": str(int(time.time()) + 3600)}
        label = f"{request.method} {request.path}"
        template = self.routes.match(request.method, request.path) if request.kind == "rest" else None
        if request.kind == "other" and (page := github_manifest.web(self, request)) is not None:
            return page
        if template is None:
            with self.lock:
                self.unknown.append(label)
            return 404, headers, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}
        if (wait := self._over_write_limit(request)) is not None:
            headers["retry-after"] = str(max(math.ceil(wait), 1))
            return 403, headers, {"message": SECONDARY_RATE_LIMIT, "documentation_url": SECONDARY_DOCS}
        fault = self._take_fault(request.method, request.path)
        if fault is None or fault.apply:
            try:
                status, data, extra = github_manifest.anonymous(self, request) or rest.dispatch(self, request)
                headers.update(extra)
            except ApiError as error:
                status, data = error.status, error.payload()
                headers.update(error.headers)
            if status == 404 and data and data.get("unhandled"):
                with self.lock:
                    self.unhandled.append(f"{label} (OpenAPI: {template})")
                data.pop("unhandled")
        if fault is not None:
            headers.update({k: v() if callable(v) else v for k, v in fault.headers.items()})
            status, data = fault.status, fault.body
        return status, headers, data

    def _serve_git(self, request: Request, match: re.Match[str], target: str, raw: bytes) -> tuple[int, dict, bytes]:
        owner, name, _ = match.groups()
        fault = self._take_fault(request.method, request.path)
        if fault is not None and not fault.apply:
            return fault.status, {k: v() if callable(v) else v for k, v in fault.headers.items()}, b""
        writing = request.path.endswith("git-receive-pack") or request.query.get("service") == "git-receive-pack"
        with self.lock:  # the state REST requests change on other threads (may_push reads every pull request)
            try:
                token = self.authenticate(request.headers.get("authorization", ""), basic=True)
            except ApiError:
                return 401, {"www-authenticate": 'Basic realm="GitHub"'}, b""
            repo = self.repos.get(f"{owner}/{name}".lower())
            if repo is None or not token.reaches(repo.full_name) or (
                    repo.private and self.role(repo, token.login) == "none" and not token.bot):
                return 404, {"content-type": "text/plain"}, b"Repository not found.\n"
            if writing and not self.may_push(repo, token, pushed_refs(raw) if request.method == "POST" else None):
                return 403, {"content-type": "text/plain"}, \
                    f"Permission to {repo.full_name}.git denied to {token.login}.\n".encode()
        workflows = "1" if token.permissions.get("workflows") == "write" or not token.bot else "0"
        status, headers, payload = http_backend(self.root, request.method, target, request.headers, raw,
                                                extra_env={"FAKE_GITHUB_WORKFLOWS": workflows})
        if writing and request.method == "POST":
            with self.lock:
                self.sync_pull_refs(repo)
        if fault is not None:
            return fault.status, {}, b""
        return status, dict(headers), payload


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        raw = self._read_body()
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            status, out, payload = self.server.fake.handle(self.command, self.path, headers, raw)  # type: ignore
        except ConnectionAbortedError:  # a paused request dropped: no answer at all
            self.close_connection = True
            return
        self.send_response(status)
        for key, value in out.items():
            self.send_header(key, value)
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_POST = do_PATCH = do_PUT = do_DELETE = do_HEAD = do_GET

    def _read_body(self) -> bytes:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("content-length") or 0))

    def log_message(self, format: str, *args: Any) -> None:
        pass


_ROUTES: list[OpenApiRoutes] = []


def openapi_routes() -> OpenApiRoutes:
    """GitHub's routes, loaded once per test session; a failed fetch fails the test (never a skip)."""
    if not _ROUTES:
        try:
            _ROUTES.append(load_routes())
        except OpenApiUnavailable as error:
            pytest.fail(f"GitHub's OpenAPI description is unavailable: {error}", pytrace=False)
    return _ROUTES[0]


@pytest.fixture
def fake_github() -> Iterator[FakeGitHub]:
    """A started fake GitHub; at teardown, fails on any request GitHub's API does not have."""
    with FakeGitHub(openapi_routes()) as fake:
        yield fake
    problems = [f"not in GitHub's REST API: {x}" for x in fake.unknown]
    problems += [f"not served by the fake (add it to tests/fakes/github_rest.py): {x}" for x in fake.unhandled]
    assert not problems, "fake GitHub saw requests it cannot answer:\n" + "\n".join(problems)

