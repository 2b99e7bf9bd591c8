"""The REST endpoints of the fake GitHub, shaped like https://docs.github.com/en/rest.

`dispatch` finds the handler for a request; handlers check the credential the
way GitHub does (a repository the token cannot reach is a 404) and answer with
the objects PyGithub parses. `render_*` build those objects from the fake's state.
"""

from __future__ import annotations

import base64
import re
import time
from typing import TYPE_CHECKING, Any, Callable

from tests.fakes.github_auth import AppIdentity, ApiError, Token

if TYPE_CHECKING:
    from tests.fakes.github import FakeGitHub, Repo, Request

MAX_BODY = 65536  # characters, for issue, pull request and comment bodies
REACTIONS = {"+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"}
WRITERS = {"write", "maintain", "admin"}
LEGACY_PERMISSION = {"admin": "admin", "maintain": "write", "write": "write", "triage": "read", "read": "read",
                     "none": "none"}
Result = tuple[int, Any, dict]
ROUTES: list[tuple[str, re.Pattern[str], Callable[..., Result]]] = []
O_R = r"/repos/(?P<owner>[^/]+)/(?P<name>[^/]+)"


def now_iso(at: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if at is None else at))


def route(method: str, pattern: str) -> Callable:
    def register(handler: Callable[..., Result]) -> Callable[..., Result]:
        ROUTES.append((method, re.compile(pattern.replace("{o_r}", O_R) + "$"), handler))
        return handler
    return register


def dispatch(fake: FakeGitHub, request: Request) -> Result:
    """(status, JSON, extra headers) for a REST request, or an ApiError."""
    for method, pattern, handler in ROUTES:
        match = pattern.match(request.path)
        if match and method == request.method:
            identity = fake.authenticate(request.headers.get("authorization", ""))
            with fake.lock:
                return handler(fake, request, identity, **match.groupdict())
    return 404, {"message": "Not Found", "unhandled": True}, {}


def not_found() -> ApiError:
    return ApiError(404, "Not Found")


def invalid(resource: str, message: str, field: str | None = None) -> ApiError:
    error = {"resource": resource, "code": "custom", "message": message}
    return ApiError(422, "Validation Failed", [{**error, "field": field} if field else error])


def need_token(identity: Any) -> Token:
    if not isinstance(identity, Token):
        raise ApiError(401, "A JSON web token is not accepted here; use an installation access token")
    return identity


def need_app(identity: Any) -> AppIdentity:
    if not isinstance(identity, AppIdentity):
        raise ApiError(401, "A JSON web token could not be decoded")
    return identity


def access(fake: FakeGitHub, identity: Any, owner: str, name: str, write: bool = False) -> Repo:
    """The repository, if the credential reaches it: 404 when it cannot see it, 403 when it may not write."""
    token = need_token(identity)
    repo = fake.repos.get(f"{owner}/{name}".lower())
    if repo is None or not token.reaches(repo.full_name):
        raise not_found()
    role = "admin" if token.bot else fake.role(repo, token.login)
    if role == "none":
        raise not_found()
    if write and role not in WRITERS:
        raise ApiError(403, "Resource not accessible by personal access token")
    return repo


def check_body(resource: str, body: Any) -> None:
    if body is not None and not isinstance(body, str):
        raise ApiError(422, "Invalid request.\n\nFor 'properties/body', is not a string or null.")
    if body is not None and len(body) > MAX_BODY:
        raise invalid(resource, f"body is too long (maximum is {MAX_BODY} characters)", "body")


def paginate(fake: FakeGitHub, request: Request, items: list) -> Result:
    """One page of `items` and GitHub's Link header.

    https://docs.github.com/en/rest/using-the-rest-api/using-pagination-in-the-rest-api
    """
    per_page = min(int(request.query.get("per_page", 30)), 100)
    page = max(int(request.query.get("page", 1)), 1)
    last = max(1, -(-len(items) // per_page))
    links = []
    base = fake.api_url

    def link(p: int, rel: str) -> str:
        query = {**request.query, "per_page": str(per_page), "page": str(p)}
        return f'<{base}{request.path}?{"&".join(f"{k}={v}" for k, v in query.items())}>; rel="{rel}"'
    if page < last:
        links += [link(page + 1, "next"), link(last, "last")]
    if page > 1:
        links += [link(1, "first"), link(page - 1, "prev")]
    return 200, items[(page - 1) * per_page: page * per_page], {"link": ", ".join(links)} if links else {}


# -- renderers --------------------------------------------------------------------------------------------
def node_id(kind: str, number: int) -> str:
    return base64.b64encode(f"0:{kind}{number}".encode()).decode().rstrip("=")


def render_user(fake: FakeGitHub, login: str) -> dict:
    user = fake.user(login)
    return {"login": login, "id": user["id"], "node_id": node_id("User", user["id"]), "type": user["type"],
            "url": f"{fake.api_url}/users/{login}", "html_url": f"{fake.web_url}/{login}",
            "avatar_url": f"{fake.web_url}/avatars/{user['id']}", "site_admin": False}


def association(fake: FakeGitHub, repo: Repo, login: str) -> str:
    if login == repo.owner:
        return "OWNER"
    return "COLLABORATOR" if repo.permissions.get(login, "none") != "none" else "NONE"


def render_repo(fake: FakeGitHub, repo: Repo) -> dict:
    api, web = f"{fake.api_url}/repos/{repo.full_name}", f"{fake.web_url}/{repo.full_name}"
    data = {"id": repo.id, "node_id": node_id("Repository", repo.id), "name": repo.name,
            "full_name": repo.full_name, "owner": render_user(fake, repo.owner), "private": repo.private,
            "visibility": "private" if repo.private else "public", "fork": repo.fork_of is not None,
            "url": api, "html_url": web, "clone_url": fake.git_url(repo.owner, repo.name),
            "git_url": fake.git_url(repo.owner, repo.name), "ssh_url": f"git@127.0.0.1:{repo.full_name}.git",
            "pulls_url": api + "/pulls{/number}", "issues_url": api + "/issues{/number}",
            "default_branch": repo.default_branch, "archived": False, "disabled": False, "has_issues": True,
            "created_at": "2024-01-01T00:00:00Z", "updated_at": "2024-01-01T00:00:00Z",
            "pushed_at": "2024-01-01T00:00:00Z"}
    if repo.fork_of:
        data["parent"] = data["source"] = render_repo(fake, fake.repo(*repo.fork_of))
    return data


def render_issue(fake: FakeGitHub, repo: Repo, number: int) -> dict:
    issue = repo.issues[number]
    api, web = f"{fake.api_url}/repos/{repo.full_name}", f"{fake.web_url}/{repo.full_name}"
    data = {"id": issue["id"], "node_id": node_id("Issue", issue["id"]), "number": number,
            "title": issue["title"], "body": issue["body"], "user": render_user(fake, issue["user"]),
            "labels": [{"id": abs(hash(n)) % 10**8, "name": n, "color": "ededed", "default": False,
                        "url": f"{api}/labels/{n}"} for n in issue["labels"]],
            "state": issue["state"], "locked": False, "assignees": [], "assignee": None,
            "comments": sum(1 for c in fake.issue_comments.values()
                            if (c["repo"], c["number"]) == (repo.full_name.lower(), number)),
            "created_at": issue["created_at"], "updated_at": issue["updated_at"], "closed_at": issue["closed_at"],
            "author_association": association(fake, repo, issue["user"]),
            "url": f"{api}/issues/{number}", "html_url": f"{web}/issues/{number}",
            "repository_url": api, "comments_url": f"{api}/issues/{number}/comments",
            "labels_url": f"{api}/issues/{number}/labels{{/name}}", "events_url": f"{api}/issues/{number}/events"}
    if number in repo.pulls:
        data["html_url"] = f"{web}/pull/{number}"
        data["pull_request"] = {"url": f"{api}/pulls/{number}", "html_url": f"{web}/pull/{number}",
                                "diff_url": f"{web}/pull/{number}.diff", "patch_url": f"{web}/pull/{number}.patch",
                                "merged_at": repo.pulls[number].get("merged_at")}
    return data


def render_pull(fake: FakeGitHub, repo: Repo, number: int) -> dict:
    issue, pull = render_issue(fake, repo, number), repo.pulls[number]
    head_repo = fake.repo(pull["head_owner"], pull["head_name"])
    api = f"{fake.api_url}/repos/{repo.full_name}"

    def end(r: Repo, ref: str, at: str | None = None) -> dict:
        try:
            sha = at or fake.branch_sha(r.owner, r.name, ref)
        except KeyError:
            sha = "0" * 40
        return {"label": f"{r.owner}:{ref}", "ref": ref, "sha": sha, "user": render_user(fake, r.owner),
                "repo": render_repo(fake, r)}
    keep = ("id", "number", "title", "body", "user", "labels", "state", "locked", "assignees", "assignee",
            "created_at", "updated_at", "closed_at", "author_association", "comments")
    return {**{k: issue[k] for k in keep}, "node_id": node_id("PullRequest", issue["id"]),
            "url": f"{api}/pulls/{number}", "html_url": issue["html_url"], "issue_url": issue["url"],
            "diff_url": issue["html_url"] + ".diff", "patch_url": issue["html_url"] + ".patch",
            "comments_url": issue["comments_url"], "review_comments_url": f"{api}/pulls/{number}/comments",
            "review_comment_url": f"{api}/pulls/comments{{/number}}", "commits_url": f"{api}/pulls/{number}/commits",
            "draft": pull["draft"], "merged": pull["merged"], "merged_at": pull.get("merged_at"), "mergeable": None,
            "merge_commit_sha": pull.get("merge_sha"),
            "maintainer_can_modify": pull.get("maintainer_can_modify", False), "head": end(head_repo, pull["head_ref"]),
            "base": end(repo, pull["base_ref"], pull.get("base_sha")), "requested_reviewers": [], "requested_teams": []}


def render_comment(fake: FakeGitHub, c: dict) -> dict:
    repo = fake.repos[c["repo"]]
    api = f"{fake.api_url}/repos/{repo.full_name}"
    kind = "pull" if c["number"] in repo.pulls else "issues"
    return {"id": c["id"], "node_id": node_id("IssueComment", c["id"]), "body": c["body"],
            "user": render_user(fake, c["user"]), "created_at": c["created_at"], "updated_at": c["updated_at"],
            "author_association": association(fake, repo, c["user"]),
            "url": f"{api}/issues/comments/{c['id']}", "issue_url": f"{api}/issues/{c['number']}",
            "html_url": f"{fake.web_url}/{repo.full_name}/{kind}/{c['number']}#issuecomment-{c['id']}"}


def render_review_comment(fake: FakeGitHub, c: dict) -> dict:
    repo = fake.repos[c["repo"]]
    api = f"{fake.api_url}/repos/{repo.full_name}"
    data = {k: c[k] for k in ("id", "body", "path", "line", "side", "diff_hunk", "commit_id", "created_at",
                              "updated_at")}
    return {**data, "node_id": node_id("PullRequestReviewComment", c["id"]), "user": render_user(fake, c["user"]),
            "pull_request_review_id": c["review_id"], "original_line": c["line"], "original_commit_id": c["commit_id"],
            "position": c["line"], "original_position": c["line"], "start_line": None, "start_side": None,
            "author_association": association(fake, repo, c["user"]), "url": f"{api}/pulls/comments/{c['id']}",
            "pull_request_url": f"{api}/pulls/{c['number']}", "subject_type": "line",
            "html_url": f"{fake.web_url}/{repo.full_name}/pull/{c['number']}#discussion_r{c['id']}",
            **({"in_reply_to_id": c["in_reply_to_id"]} if c["in_reply_to_id"] else {})}


def render_reaction(fake: FakeGitHub, x: dict) -> dict:
    return {"id": x["id"], "node_id": node_id("Reaction", x["id"]), "content": x["content"],
            "user": render_user(fake, x["user"]), "created_at": x["created_at"]}


def render_installation(fake: FakeGitHub) -> dict:
    account = next((r.owner for r in fake.repos.values()), "octocat")
    iid = fake.installation_id
    return {"id": iid, "app_id": fake.app_id, "app_slug": fake.app.slug, "target_type": "User",
            "account": render_user(fake, account), "repository_selection": "all",
            "access_tokens_url": f"{fake.api_url}/app/installations/{iid}/access_tokens",
            "repositories_url": f"{fake.api_url}/installation/repositories",
            "html_url": f"{fake.web_url}/settings/installations/{iid}", "target_id": 1,
            "permissions": dict(fake.installation_permissions),
            "events": ["issues", "issue_comment", "pull_request_review_comment"],
            "created_at": "2024-01-01T00:00:00Z", "updated_at": "2024-01-01T00:00:00Z", "single_file_name": None}


# -- GitHub App ---------------------------------------------------------------------------------------------
@route("GET", "/app")
def get_app(fake, request, identity) -> Result:
    need_app(identity)
    return 200, {"id": fake.app_id, "slug": fake.app.slug, "name": fake.app.slug,
                 "node_id": node_id("App", fake.app_id),
                 "owner": render_user(fake, "octocat"), "html_url": f"{fake.web_url}/apps/{fake.app.slug}",
                 "created_at": "2024-01-01T00:00:00Z", "updated_at": "2024-01-01T00:00:00Z",
                 "permissions": render_installation(fake)["permissions"], "events": []}, {}


@route("GET", "{o_r}/installation")
def get_repo_installation(fake, request, identity, owner, name) -> Result:
    need_app(identity)
    if fake.repos.get(f"{owner}/{name}".lower()) is None:
        raise not_found()
    return 200, render_installation(fake), {}


@route("GET", r"/app/installations/(?P<iid>\d+)")
def get_installation(fake, request, identity, iid) -> Result:
    need_app(identity)
    if int(iid) != fake.installation_id:
        raise not_found()
    return 200, render_installation(fake), {}


@route("POST", r"/app/installations/(?P<iid>\d+)/access_tokens")
def create_access_token(fake, request, identity, iid) -> Result:
    need_app(identity)
    if int(iid) != fake.installation_id:
        raise not_found()
    body = request.body or {}
    token = fake.mint_installation_token(body.get("repositories"), body.get("permissions") or None)
    data = {"token": token.value, "expires_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(token.expires_at)),
            "permissions": token.permissions, "repository_selection": "selected" if token.repositories else "all"}
    if token.repositories:
        data["repositories"] = [render_repo(fake, fake.repos[r.lower()]) for r in sorted(token.repositories)]
    return 201, data, {}


# -- users and repositories ---------------------------------------------------------------------------------
@route("GET", "/user")
def get_authenticated_user(fake, request, identity) -> Result:
    token = need_token(identity)
    if token.installation_id is not None or token.bot:  # GitHub: installation tokens may not read /user
        raise ApiError(403, "Resource not accessible by integration")
    return 200, render_user(fake, token.login), {}


@route("GET", r"/users/(?P<login>[^/]+)")
def get_user(fake, request, identity, login) -> Result:
    if login not in fake.users:
        raise not_found()
    return 200, render_user(fake, login), {}


@route("GET", "{o_r}")
def get_repo(fake, request, identity, owner, name) -> Result:
    return 200, render_repo(fake, access(fake, identity, owner, name)), {}


@route("GET", "{o_r}/branches/(?P<branch>.+)")
def get_branch(fake, request, identity, owner, name, branch) -> Result:
    repo = access(fake, identity, owner, name)
    try:
        sha = fake.branch_sha(repo.owner, repo.name, branch)
    except KeyError:
        raise ApiError(404, "Branch not found") from None
    return 200, {"name": branch, "protected": False, "commit": {
        "sha": sha, "url": f"{fake.api_url}/repos/{repo.full_name}/commits/{sha}"}}, {}


@route("GET", "{o_r}/collaborators/(?P<login>[^/]+)/permission")
def get_permission(fake, request, identity, owner, name, login) -> Result:
    repo = access(fake, identity, owner, name)
    if not identity.bot and fake.role(repo, identity.login) not in WRITERS:
        raise ApiError(403, "Must have push access to view collaborator permission.")
    if login not in fake.users:
        raise ApiError(404, f"{login} is not a user")
    role = fake.role(repo, login)
    user = {**render_user(fake, login), "role_name": role, "permissions": {
        "admin": role == "admin", "maintain": role in ("maintain", "admin"), "push": role in WRITERS,
        "triage": role in WRITERS | {"triage"}, "pull": role != "none"}}
    return 200, {"permission": LEGACY_PERMISSION[role], "role_name": role, "user": user}, {}

