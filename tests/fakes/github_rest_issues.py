"""Issues, comments, reactions and pull requests of the fake GitHub.

Shapes and errors follow https://docs.github.com/en/rest/issues, .../rest/pulls
and .../rest/reactions; the 422 texts are the ones GitHub sends.
"""

from __future__ import annotations

import subprocess
from urllib.parse import unquote

from tests.fakes.github_auth import ApiError
from tests.fakes.github_git_data import verification
from tests.fakes.github_rest import (
    REACTIONS, WRITERS, Result, access, check_body, invalid, not_found, now_iso, paginate, render_comment, render_issue,
    render_pull, render_reaction, render_review_comment, route,
)

N = r"(?P<number>\d+)"
CID = r"(?P<cid>\d+)"


def now() -> str:
    return now_iso()


def may_edit(fake, repo, identity, author: str) -> None:
    if not identity.bot and identity.login != author and fake.role(repo, identity.login) not in WRITERS:
        raise ApiError(403, "Resource not accessible by personal access token")


def issue_of(repo, number: str) -> dict:
    issue = repo.issues.get(int(number))
    if issue is None:
        raise not_found()
    return issue


def comment_of(fake, repo, cid: str, store: str = "issue_comments") -> dict:
    comment = getattr(fake, store).get(int(cid))
    if comment is None or comment["repo"] != repo.full_name.lower():
        raise not_found()
    return comment


# -- issues and issue comments -------------------------------------------------------------------------------
@route("GET", "{o_r}/issues/" + N)
def get_issue(fake, request, identity, owner, name, number) -> Result:
    repo = access(fake, identity, owner, name)
    issue_of(repo, number)
    return 200, render_issue(fake, repo, int(number)), {}


@route("PATCH", "{o_r}/issues/" + N)
def edit_issue(fake, request, identity, owner, name, number) -> Result:
    repo = access(fake, identity, owner, name)
    issue = issue_of(repo, number)
    may_edit(fake, repo, identity, issue["user"])
    body = request.body or {}
    check_body("Issue", body.get("body"))
    for key in ("title", "body", "state"):
        if key in body:
            issue[key] = body[key]
    if "labels" in body:
        issue["labels"] = [x if isinstance(x, str) else x["name"] for x in body["labels"]]
    issue["closed_at"] = now() if issue["state"] == "closed" else None
    issue["updated_at"] = now()
    return 200, render_issue(fake, repo, int(number)), {}


@route("GET", "{o_r}/issues/" + N + "/comments")
def list_comments(fake, request, identity, owner, name, number) -> Result:
    repo = access(fake, identity, owner, name)
    issue_of(repo, number)
    return paginate(fake, request, fake.comments(repo.owner, repo.name, int(number)))


@route("POST", "{o_r}/issues/" + N + "/comments")
def create_comment(fake, request, identity, owner, name, number) -> Result:
    repo = access(fake, identity, owner, name)
    issue_of(repo, number)
    body = (request.body or {}).get("body")
    if not body:
        raise ApiError(422, "Invalid request.\n\n\"body\" wasn't supplied.")
    check_body("IssueComment", body)
    cid = fake.add_comment(repo.owner, repo.name, int(number), body, user=identity.login)
    return 201, render_comment(fake, fake.issue_comments[cid]), {}


@route("GET", "{o_r}/issues/comments/" + CID)
def get_comment(fake, request, identity, owner, name, cid) -> Result:
    repo = access(fake, identity, owner, name)
    return 200, render_comment(fake, comment_of(fake, repo, cid)), {}


@route("PATCH", "{o_r}/issues/comments/" + CID)
def edit_comment(fake, request, identity, owner, name, cid) -> Result:
    repo = access(fake, identity, owner, name)
    comment = comment_of(fake, repo, cid)
    may_edit(fake, repo, identity, comment["user"])
    body = (request.body or {}).get("body")
    if not body:
        raise ApiError(422, "Invalid request.\n\n\"body\" wasn't supplied.")
    check_body("IssueComment", body)
    comment.update(body=body, updated_at=now())
    return 200, render_comment(fake, comment), {}


@route("DELETE", "{o_r}/issues/comments/" + CID)
def delete_comment(fake, request, identity, owner, name, cid) -> Result:
    repo = access(fake, identity, owner, name)
    comment = comment_of(fake, repo, cid)
    may_edit(fake, repo, identity, comment["user"])
    del fake.issue_comments[comment["id"]]
    return 204, None, {}


# -- reactions ------------------------------------------------------------------------------------------------
def react(fake, request, identity, subject: tuple) -> Result:
    content = (request.body or {}).get("content")
    if content not in REACTIONS:
        raise invalid("Reaction", f"content is not included in the list {sorted(REACTIONS)}", "content")
    for existing in fake.reaction_list:
        if (existing["subject"], existing["content"], existing["user"]) == (subject, content, identity.login):
            return 200, render_reaction(fake, existing), {}
    reaction = {"id": fake.next_id(), "subject": subject, "content": content, "user": identity.login,
                "created_at": now()}
    fake.reaction_list.append(reaction)
    return 201, render_reaction(fake, reaction), {}


def listed(fake, request, subject: tuple) -> Result:
    return paginate(fake, request, [render_reaction(fake, x) for x in fake.reaction_list if x["subject"] == subject])


@route("POST", "{o_r}/issues/" + N + "/reactions")
def react_issue(fake, request, identity, owner, name, number) -> Result:
    repo = access(fake, identity, owner, name)
    issue_of(repo, number)
    return react(fake, request, identity, ("issue", repo.full_name.lower(), int(number)))


@route("GET", "{o_r}/issues/" + N + "/reactions")
def list_issue_reactions(fake, request, identity, owner, name, number) -> Result:
    repo = access(fake, identity, owner, name)
    return listed(fake, request, ("issue", repo.full_name.lower(), int(number)))


@route("POST", "{o_r}/issues/comments/" + CID + "/reactions")
def react_comment(fake, request, identity, owner, name, cid) -> Result:
    comment_of(fake, access(fake, identity, owner, name), cid)
    return react(fake, request, identity, ("comment", int(cid)))


@route("GET", "{o_r}/issues/comments/" + CID + "/reactions")
def list_comment_reactions(fake, request, identity, owner, name, cid) -> Result:
    comment_of(fake, access(fake, identity, owner, name), cid)
    return listed(fake, request, ("comment", int(cid)))


@route("POST", "{o_r}/pulls/comments/" + CID + "/reactions")
def react_review_comment(fake, request, identity, owner, name, cid) -> Result:
    comment_of(fake, access(fake, identity, owner, name), cid, "review_comments")
    return react(fake, request, identity, ("review_comment", int(cid)))


@route("GET", "{o_r}/pulls/comments/" + CID + "/reactions")
def list_review_comment_reactions(fake, request, identity, owner, name, cid) -> Result:
    comment_of(fake, access(fake, identity, owner, name), cid, "review_comments")
    return listed(fake, request, ("review_comment", int(cid)))


# -- pull requests ----------------------------------------------------------------------------------------------
@route("GET", "{o_r}/pulls")
def list_pulls(fake, request, identity, owner, name) -> Result:
    repo = access(fake, identity, owner, name)
    state, head, base = request.query.get("state", "open"), request.query.get("head"), request.query.get("base")
    found = []
    for number in sorted(repo.pulls, reverse=True):
        pull, issue = repo.pulls[number], repo.issues[number]
        if state != "all" and issue["state"] != state:
            continue
        # A head without "owner:" is silently ignored by GitHub, as here.
        if head and ":" in head and head.lower() != f"{pull['head_owner']}:{pull['head_ref']}".lower():
            continue
        if base and base != pull["base_ref"]:
            continue
        found.append(render_pull(fake, repo, number))
    return paginate(fake, request, found)


def commits_between(fake, repo, head_repo, head_ref: str, base_ref: str) -> int:
    ref = "refs/fake-github/compare"
    subprocess.run(["git", "fetch", "-q", "--no-tags", str(head_repo.path), f"+refs/heads/{head_ref}:{ref}"],
                   cwd=repo.path, capture_output=True, check=True)
    count = subprocess.run(["git", "rev-list", "--count", f"refs/heads/{base_ref}..{ref}"], cwd=repo.path,
                           capture_output=True, text=True, check=True).stdout
    subprocess.run(["git", "update-ref", "-d", ref], cwd=repo.path, capture_output=True)
    return int(count)


@route("POST", "{o_r}/pulls")
def create_pull(fake, request, identity, owner, name) -> Result:
    repo = access(fake, identity, owner, name)
    body = request.body or {}
    for key in ("title", "head", "base"):
        if not body.get(key) and not (key == "title" and body.get("issue")):
            raise ApiError(422, "Validation Failed", [{"resource": "PullRequest", "field": key,
                                                       "code": "missing_field"}])
    check_body("PullRequest", body.get("body"))
    head_owner, _, head_ref = body["head"].rpartition(":")
    head_owner = head_owner or repo.owner
    network = [r for r in fake.repos.values() if r is repo or r.fork_of == (repo.owner, repo.name)]
    head_repo = next((r for r in network if r.owner.lower() == head_owner.lower()), None)
    try:
        assert head_repo is not None
        fake.branch_sha(head_repo.owner, head_repo.name, head_ref)
    except (AssertionError, KeyError):
        raise ApiError(422, "Validation Failed", [{"resource": "PullRequest", "field": "head",
                                                   "code": "invalid"}]) from None
    try:
        fake.branch_sha(repo.owner, repo.name, body["base"])
    except KeyError:
        raise ApiError(422, "Validation Failed", [{"resource": "PullRequest", "field": "base",
                                                   "code": "invalid"}]) from None
    for number, pull in repo.pulls.items():
        same = (pull["head_owner"], pull["head_name"], pull["head_ref"], pull["base_ref"])
        if repo.issues[number]["state"] == "open" and same == (head_repo.owner, head_repo.name, head_ref,
                                                               body["base"]):
            raise invalid("PullRequest", f"A pull request already exists for {head_repo.owner}:{head_ref}.")
    if commits_between(fake, repo, head_repo, head_ref, body["base"]) == 0:
        raise invalid("PullRequest", f"No commits between {body['base']} and {head_ref}")
    number = fake.add_pull(repo.owner, repo.name, body["title"], body.get("body") or "", head_branch=head_ref,
                           base_branch=body["base"], user=identity.login, head_repo=(head_repo.owner, head_repo.name),
                           draft=bool(body.get("draft")))
    return 201, render_pull(fake, repo, number), {}


def pull_of(repo, number: str) -> dict:
    if int(number) not in repo.pulls:
        raise not_found()
    return repo.pulls[int(number)]


@route("GET", "{o_r}/pulls/" + N)
def get_pull(fake, request, identity, owner, name, number) -> Result:
    repo = access(fake, identity, owner, name)
    pull_of(repo, number)
    return 200, render_pull(fake, repo, int(number)), {}


@route("PATCH", "{o_r}/pulls/" + N)
def edit_pull(fake, request, identity, owner, name, number) -> Result:
    """title, body, state, base; `draft` is not a field of this endpoint on GitHub (GraphQL only) and is ignored."""
    repo = access(fake, identity, owner, name)
    pull, issue = pull_of(repo, number), repo.issues[int(number)]
    may_edit(fake, repo, identity, issue["user"])
    body = request.body or {}
    check_body("PullRequest", body.get("body"))
    if body.get("state") not in (None, "open", "closed"):
        raise invalid("PullRequest", "state is not included in the list", "state")
    for key in ("title", "body", "state"):
        if key in body:
            issue[key] = body[key]
    if body.get("base"):
        pull["base_ref"] = body["base"]
    issue["closed_at"] = now() if issue["state"] == "closed" else None
    issue["updated_at"] = now()
    return 200, render_pull(fake, repo, int(number)), {}


def commits_of(fake, repo, git_dir, revisions: list[str]) -> list[dict]:
    """REST commit objects (https://docs.github.com/en/rest/commits/commits) for `git log` of `revisions`."""
    sep, end = "\x1f", "\x1e"
    out = subprocess.run(["git", "log", f"--format=%H{sep}%an{sep}%ae{sep}%aI{sep}%cn{sep}%ce{sep}%cI{sep}%B{end}",
                          *revisions], cwd=git_dir, capture_output=True, text=True, check=True).stdout
    api, commits = f"{fake.api_url}/repos/{repo.full_name}", []
    for record in filter(str.strip, out.split(end)):
        sha, an, ae, ad, cn, ce, cd, message = record.strip("\n").split(sep)
        commits.append({"sha": sha, "node_id": "C_x", "url": f"{api}/commits/{sha}",
                        "html_url": f"{fake.web_url}/{repo.full_name}/commit/{sha}", "author": None, "committer": None,
                        "parents": [], "commit": {"message": message.strip(), "url": f"{api}/git/commits/{sha}",
                                                  "author": {"name": an, "email": ae, "date": ad},
                                                  "committer": {"name": cn, "email": ce, "date": cd},
                                                  "tree": {"sha": "0" * 40, "url": f"{api}/git/trees/{'0' * 40}"},
                                                  "comment_count": 0, "verification": verification(fake, sha)}})
    return commits


@route("GET", "{o_r}/pulls/" + N + "/commits")
def list_pull_commits(fake, request, identity, owner, name, number) -> Result:
    """The commits on the head not on the base, oldest first (https://docs.github.com/en/rest/pulls/pulls)."""
    repo = access(fake, identity, owner, name)
    pull = pull_of(repo, number)
    head = fake.branch_sha(pull["head_owner"], pull["head_name"], pull["head_ref"])
    base = fake.branch_sha(repo.owner, repo.name, pull["base_ref"])
    head_dir = fake.repo(pull["head_owner"], pull["head_name"]).path
    return paginate(fake, request, commits_of(fake, repo, head_dir, ["--reverse", f"{base}..{head}"]))


@route("GET", "{o_r}/pulls/" + N + "/files")
def list_pull_files(fake, request, identity, owner, name, number) -> Result:
    """The files the pull request changes, with their status (https://docs.github.com/en/rest/pulls/pulls)."""
    repo = access(fake, identity, owner, name)
    pull = pull_of(repo, number)
    base = pull.get("base_sha") or fake.branch_sha(repo.owner, repo.name, pull["base_ref"])
    head = pull.get("merge_sha") or fake.branch_sha(pull["head_owner"], pull["head_name"], pull["head_ref"])
    changed = subprocess.run(["git", "diff", "--name-status", "-M", base, head], cwd=repo.path, capture_output=True,
                             text=True, check=True).stdout.splitlines()
    statuses = {"A": "added", "M": "modified", "D": "removed", "R": "renamed"}
    files = []
    for line in changed:
        code, *paths = line.split("\t")
        entry = {"sha": "0" * 40, "filename": paths[-1], "status": statuses.get(code[0], "changed"), "additions": 0,
                 "deletions": 0, "changes": 0, "blob_url": "", "raw_url": "", "contents_url": ""}
        files.append({**entry, "previous_filename": paths[0]} if code.startswith("R") else entry)
    return paginate(fake, request, files)


@route("GET", "{o_r}/commits/(?P<ref>[0-9a-f]{40})")
def get_commit(fake, request, identity, owner, name, ref) -> Result:
    repo = access(fake, identity, owner, name)
    try:
        [commit] = commits_of(fake, repo, repo.path, ["-1", ref])
    except subprocess.CalledProcessError:
        raise not_found() from None
    return 200, {**commit, "stats": {"additions": 0, "deletions": 0, "total": 0}, "files": []}, {}


@route("GET", "{o_r}/pulls/" + N + "/comments")
def list_review_comments(fake, request, identity, owner, name, number) -> Result:
    repo = access(fake, identity, owner, name)
    pull_of(repo, number)
    return paginate(fake, request, fake.review_comments_on(repo.owner, repo.name, int(number)))


@route("GET", "{o_r}/pulls/comments/" + CID)
def get_review_comment(fake, request, identity, owner, name, cid) -> Result:
    repo = access(fake, identity, owner, name)
    return 200, render_review_comment(fake, comment_of(fake, repo, cid, "review_comments")), {}


@route("POST", "{o_r}/pulls/" + N + "/comments/" + CID + "/replies")
def reply_review_comment(fake, request, identity, owner, name, number, cid) -> Result:
    repo = access(fake, identity, owner, name)
    pull_of(repo, number)
    parent = comment_of(fake, repo, cid, "review_comments")
    if parent["number"] != int(number):
        raise not_found()
    body = (request.body or {}).get("body")
    if not body:
        raise ApiError(422, "Invalid request.\n\n\"body\" wasn't supplied.")
    check_body("PullRequestReviewComment", body)
    new = fake.add_review_comment(repo.owner, repo.name, int(number), body, path=parent["path"], line=parent["line"],
                                  user=identity.login, diff_hunk=parent["diff_hunk"], side=parent["side"],
                                  in_reply_to=parent["in_reply_to_id"] or parent["id"])
    return 201, render_review_comment(fake, fake.review_comments[new]), {}


# -- labels (https://docs.github.com/en/rest/issues/labels) ---------------------------------------------------
def render_label(fake, repo, label: dict) -> dict:
    return {"id": abs(hash(label["name"])) % 10**8, "node_id": "LA_x", "name": label["name"],
            "color": label["color"], "description": label.get("description"), "default": False,
            "url": f"{fake.api_url}/repos/{repo.full_name}/labels/{label['name']}"}


@route("GET", "{o_r}/labels/(?P<label>[^/]+)")
def get_label(fake, request, identity, owner, name, label) -> Result:
    repo = access(fake, identity, owner, name)
    found = repo.labels.get(unquote(label).lower())
    if found is None:
        raise not_found()
    return 200, render_label(fake, repo, found), {}


@route("POST", "{o_r}/labels")
def create_label(fake, request, identity, owner, name) -> Result:
    repo = access(fake, identity, owner, name, write=True)
    body = request.body or {}
    if not isinstance(body.get("name"), str) or not body["name"].strip():
        raise invalid("Label", "name is missing", "name")
    if body["name"].lower() in repo.labels:
        raise ApiError(422, "Validation Failed", [{"resource": "Label", "code": "already_exists", "field": "name"}])
    label = {"name": body["name"], "color": str(body.get("color") or "ededed"), "description": body.get("description")}
    repo.labels[body["name"].lower()] = label
    return 201, render_label(fake, repo, label), {}
