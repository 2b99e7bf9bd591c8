"""Pull request reviews and file contents of the fake GitHub.

Shapes follow https://docs.github.com/en/rest/pulls/reviews and
https://docs.github.com/en/rest/repos/contents; tests add reviews with `FakeGitHub.add_review`.
Replies in a review thread are served with the other review comment routes (github_rest_issues).
"""

from __future__ import annotations

import base64
import subprocess
from urllib.parse import unquote

from tests.fakes.github_rest import Result, access, association, node_id, not_found, paginate, render_user, route
from tests.fakes.github_rest_issues import pull_of
from tests.fakes.github_state import GIT_ENV

N = r"(?P<number>\d+)"
RID = r"(?P<rid>\d+)"


def render_review(fake, review: dict) -> dict:
    repo = fake.repos[review["repo"]]
    web = f"{fake.web_url}/{repo.full_name}/pull/{review['number']}"
    api = f"{fake.api_url}/repos/{repo.full_name}/pulls/{review['number']}"
    return {"id": review["id"], "node_id": node_id("PullRequestReview", review["id"]),
            "user": render_user(fake, review["user"]), "body": review["body"] or "", "state": review["state"],
            "commit_id": review["commit_id"], "submitted_at": review["submitted_at"],
            "author_association": association(fake, repo, review["user"]),
            "html_url": f"{web}#pullrequestreview-{review['id']}", "pull_request_url": api,
            "_links": {"html": {"href": f"{web}#pullrequestreview-{review['id']}"}, "pull_request": {"href": api}}}


def review_of(fake, repo, number: str, rid: str) -> dict:
    review = fake.reviews.get(int(rid))
    if review is None or (review["repo"], review["number"]) != (repo.full_name.lower(), int(number)):
        raise not_found()
    return review


@route("GET", "{o_r}/pulls/" + N + "/reviews/" + RID)
def get_review(fake, request, identity, owner, name, number, rid) -> Result:
    repo = access(fake, identity, owner, name)
    pull_of(repo, number)
    return 200, render_review(fake, review_of(fake, repo, number, rid)), {}


@route("GET", "{o_r}/pulls/" + N + "/reviews/" + RID + "/comments")
def list_review_comments_of_review(fake, request, identity, owner, name, number, rid) -> Result:
    repo = access(fake, identity, owner, name)
    pull_of(repo, number)
    review_of(fake, repo, number, rid)
    return paginate(fake, request, [c for c in fake.review_comments_on(repo.owner, repo.name, int(number))
                                    if c["pull_request_review_id"] == int(rid)])


@route("GET", "{o_r}/contents/(?P<path>.+)")
def get_contents(fake, request, identity, owner, name, path) -> Result:
    """A file (base64) at `ref` (default: the default branch); 404 when there is none. Directories and links
    are not served: nothing here reads them."""
    repo = access(fake, identity, owner, name)
    path, ref = unquote(path).strip("/"), request.query.get("ref") or repo.default_branch

    def git(*args: str) -> bytes:
        return subprocess.run(["git", *args], cwd=repo.path, env=GIT_ENV, capture_output=True).stdout
    entry = git("ls-tree", "-l", ref, "--", path).decode().split("\t")[0].split()
    if len(entry) != 4 or entry[1] != "blob" or entry[0] == "120000":
        raise not_found()
    data, web = git("cat-file", "blob", entry[2]), f"{fake.web_url}/{repo.full_name}"
    url = f"{fake.api_url}/repos/{repo.full_name}/contents/{path}?ref={ref}"
    git_url = f"{fake.api_url}/repos/{repo.full_name}/git/blobs/{entry[2]}"
    return 200, {"type": "file", "encoding": "base64", "size": len(data), "name": path.rsplit("/", 1)[-1],
                 "path": path, "content": base64.b64encode(data).decode(), "sha": entry[2], "url": url,
                 "git_url": git_url, "html_url": f"{web}/blob/{ref}/{path}", "download_url": None,
                 "_links": {"self": url, "git": git_url, "html": f"{web}/blob/{ref}/{path}"}}, {}
