"""The Git Database API of the fake GitHub: blobs, trees, commits and refs, written as real objects into the
bare repository, so a later fetch or clone sees them.

Shapes follow https://docs.github.com/en/rest/git (blobs, trees, commits, refs). A commit made by a bot token
with no author, committer or signature is made as the token's identity and marked verified, as GitHub signs
it (https://docs.github.com/en/authentication/managing-commit-signature-verification/about-commit-signature-verification#signature-verification-for-bots);
`FakeGitHub.api_commits` records each commit made here. Ref updates move only forward unless `force`, and
run the repository's pre-receive hook, so a bot token without `workflows: write` cannot add a workflow here
either.
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import tempfile

from tests.fakes.github_auth import ApiError
from tests.fakes.github_rest import Result, access, invalid, node_id, not_found, now_iso, route
from tests.fakes.github_state import GIT_ENV

SHA = r"(?P<sha>[0-9a-f]{40})"
MODES = {"100644": "blob", "100755": "blob", "120000": "blob", "040000": "tree", "160000": "commit"}
WEB_FLOW = ("GitHub", "noreply@github.com")  # the committer GitHub records on commits it signs


def _git(repo, *args: str, input: bytes | None = None, env: dict | None = None) -> bytes:
    res = subprocess.run(["git", *args], cwd=repo.path, env={**GIT_ENV, **(env or {})}, input=input,
                         capture_output=True)
    if res.returncode:
        raise invalid("Git", res.stderr.decode().strip() or f"git {args[0]} failed")
    return res.stdout


def _kind(repo, sha: str | None) -> str | None:
    """The object type of `sha` in `repo` (blob, tree, commit), or None when it has none."""
    return _kinds(repo, [sha])[0] if isinstance(sha, str) and sha.strip() else None


def _api(fake, repo, kind: str, sha: str) -> str:
    return f"{fake.api_url}/repos/{repo.full_name}/git/{kind}/{sha}"


@route("POST", "{o_r}/git/blobs")
def create_blob(fake, request, identity, owner, name) -> Result:
    repo = access(fake, identity, owner, name, write=True)
    body = request.body or {}
    if not isinstance(body.get("content"), str) or body.get("encoding", "utf-8") not in ("utf-8", "base64"):
        raise invalid("Blob", "content must be a string; encoding utf-8 or base64", "content")
    data = base64.b64decode(body["content"]) if body.get("encoding") == "base64" else body["content"].encode()
    sha = _git(repo, "hash-object", "-w", "--stdin", input=data).decode().strip()
    return 201, {"url": _api(fake, repo, "blobs", sha), "sha": sha}, {}


def render_tree(fake, repo, sha: str) -> dict:
    entries = []
    for line in _git(repo, "ls-tree", "-z", sha).split(b"\0"):
        if line:
            meta, path = line.decode().split("\t", 1)
            mode, kind, entry_sha = meta.split()
            entries.append({"path": path, "mode": mode, "type": kind, "sha": entry_sha,
                            "url": _api(fake, repo, f"{kind}s", entry_sha)})
    return {"sha": sha, "url": _api(fake, repo, "trees", sha), "tree": entries, "truncated": False}


@route("POST", "{o_r}/git/trees")
def create_tree(fake, request, identity, owner, name) -> Result:
    """The tree of `base_tree` (or an empty one) with `tree`'s entries set or, with `sha: null`, removed; an
    entry may carry its file's `content` inline instead of a blob's `sha`, as GitHub's does
    (https://docs.github.com/en/rest/git/trees#create-a-tree). A few git processes whatever the entry count."""
    repo = access(fake, identity, owner, name, write=True)
    body = request.body or {}
    base = body.get("base_tree")
    if base is not None and _kinds(repo, [base]) != ["tree"]:
        raise invalid("Tree", f"base_tree {base} is not a tree", "base_tree")
    entries = body.get("tree") or []
    for entry in entries:
        mode = entry.get("mode")
        if mode not in MODES or entry.get("type") != MODES[mode] or not entry.get("path"):
            raise invalid("Tree", f"tree.mode {mode} and tree.type {entry.get('type')} do not match", "tree")
        if "content" in entry and (entry.get("sha") is not None or not isinstance(entry["content"], str)):
            raise invalid("Tree", "use either tree.sha or tree.content (a string), not both", "tree.content")
    inline = _hash_contents(repo, [e["content"] for e in entries if "content" in e])
    shas = [inline.pop(0) if "content" in e else e.get("sha") for e in entries]
    named = [(e, sha) for e, sha in zip(entries, shas) if sha is not None and e["mode"] != "160000"]
    for (entry, sha), kind in zip(named, _kinds(repo, [sha for _, sha in named])):
        if kind != MODES[entry["mode"]]:
            raise invalid("Tree", f"tree.sha {sha} is not a valid {MODES[entry['mode']]}", "tree.sha")
    info = b"".join(f"{e['mode'] if sha else '0'} {sha or '0' * 40}\t{e['path']}\0".encode()  # mode 0 removes
                    for e, sha in zip(entries, shas))
    with tempfile.TemporaryDirectory() as tmp:
        env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
        _git(repo, "read-tree", *([base] if base else ["--empty"]), env=env)
        _git(repo, "update-index", "-z", "--index-info", input=info, env=env)
        sha = _git(repo, "write-tree", env=env).decode().strip()
    return 201, render_tree(fake, repo, sha), {}


def _hash_contents(repo, contents: list[str]) -> list[str]:
    """Write each of `contents` as a blob (UTF-8) in one `git fast-import` process; their shas, in order (a
    blob's sha is git's: sha1 of its header and bytes)."""
    if not contents:
        return []
    stream, shas = [], []
    for text in contents:
        data = text.encode()
        stream += [b"blob\ndata %d\n" % len(data), data, b"\n"]
        shas.append(hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest())
    _git(repo, "fast-import", "--quiet", input=b"".join(stream))
    return shas


def _kinds(repo, shas: list[str]) -> list[str | None]:
    """The object type of each of `shas` (None for a missing one), in one `git cat-file` process."""
    if not shas:
        return []
    out = _git(repo, "cat-file", "--batch-check=%(objecttype)", input="".join(f"{s}\n" for s in shas).encode())
    return [None if line.endswith("missing") else line for line in out.decode().splitlines()]


def verification(fake, sha: str) -> dict:
    """The commit's `verification` object: verified when a bot made it here without author or committer."""
    made = fake.api_commits.get(sha)
    if made and made["signed"]:
        return {"verified": True, "reason": "valid", "signature": "-----BEGIN PGP SIGNATURE-----\n...",
                "payload": f"commit {sha}", "verified_at": made["at"]}
    return {"verified": False, "reason": "unsigned", "signature": None, "payload": None, "verified_at": None}


def render_commit(fake, repo, sha: str) -> dict:
    fields = _git(repo, "log", "-1", "--format=%T%x00%P%x00%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI", sha)
    tree, parents, an, ae, ad, cn, ce, cd = fields.decode().strip().split("\0")
    message = _git(repo, "cat-file", "commit", sha).split(b"\n\n", 1)[1].decode()
    return {"sha": sha, "node_id": node_id("Commit", int(sha[:7], 16)), "url": _api(fake, repo, "commits", sha),
            "html_url": f"{fake.web_url}/{repo.full_name}/commit/{sha}",
            "author": {"name": an, "email": ae, "date": ad}, "committer": {"name": cn, "email": ce, "date": cd},
            "message": message,
            "tree": {"sha": tree, "url": _api(fake, repo, "trees", tree)},
            "parents": [{"sha": p, "url": _api(fake, repo, "commits", p),
                         "html_url": f"{fake.web_url}/{repo.full_name}/commit/{p}"} for p in parents.split()],
            "verification": verification(fake, sha)}


@route("GET", "{o_r}/git/(?P<kind>trees|commits)/" + SHA)
def get_object(fake, request, identity, owner, name, kind, sha) -> Result:
    """A tree or a commit, as the Git Database API renders it; 404 when `sha` is not one."""
    repo = access(fake, identity, owner, name)
    if _kind(repo, sha) != kind[:-1]:
        raise not_found()
    return 200, (render_tree if kind == "trees" else render_commit)(fake, repo, sha), {}


@route("POST", "{o_r}/git/commits")
def create_commit(fake, request, identity, owner, name) -> Result:
    """A commit of `tree` on `parents`; without author or committer it is the token's, committed by GitHub and,
    for a bot token without a signature, verified."""
    repo = access(fake, identity, owner, name, write=True)
    body = request.body or {}
    if not isinstance(body.get("message"), str) or _kind(repo, body.get("tree")) != "tree":
        raise invalid("Commit", "message and tree are required; tree must be a tree", "tree")
    parents = body.get("parents") or []
    if any(_kind(repo, p) != "commit" for p in parents):
        raise invalid("Commit", "parents must be commits", "parents")
    custom = any(key in body for key in ("author", "committer", "signature"))
    user = fake.user(identity.login)
    me = (identity.login, f"{user['id']}+{identity.login}@users.noreply.github.com")
    author = (body["author"]["name"], body["author"]["email"]) if "author" in body else me
    committer = (body["committer"]["name"], body["committer"]["email"]) if "committer" in body else \
        author if "author" in body else WEB_FLOW
    env = {"GIT_AUTHOR_NAME": author[0], "GIT_AUTHOR_EMAIL": author[1], "GIT_COMMITTER_NAME": committer[0],
           "GIT_COMMITTER_EMAIL": committer[1]}
    args = [a for p in parents for a in ("-p", p)]
    sha = _git(repo, "commit-tree", body["tree"], *args, "-F", "-", input=body["message"].encode(),
               env=env).decode().strip()
    fake.api_commits[sha] = {"repo": repo.full_name, "by": identity.login, "at": now_iso(),
                             "signed": identity.bot and not custom}
    return 201, render_commit(fake, repo, sha), {}


def render_ref(fake, repo, ref: str, sha: str) -> dict:
    return {"ref": ref, "node_id": node_id("Ref", abs(hash(ref)) % 10**6),
            "url": f"{fake.api_url}/repos/{repo.full_name}/git/{ref}",
            "object": {"type": "commit", "sha": sha, "url": _api(fake, repo, "commits", sha)}}


def _ref_sha(repo, ref: str) -> str | None:
    out = subprocess.run(["git", "rev-parse", "--verify", "-q", ref], cwd=repo.path, env=GIT_ENV,
                         capture_output=True)
    return out.stdout.decode().strip() or None


@route("GET", "{o_r}/git/ref/(?P<ref>.+)")
def get_ref(fake, request, identity, owner, name, ref) -> Result:
    repo = access(fake, identity, owner, name)
    sha = _ref_sha(repo, f"refs/{ref}")
    if sha is None:
        raise not_found()
    return 200, render_ref(fake, repo, f"refs/{ref}", sha), {}


def _move(fake, identity, repo, ref: str, old: str | None, new: str) -> None:
    """Point `ref` at `new` as a push would: the token may write there and the pre-receive hook agrees."""
    if _kind(repo, new) != "commit":
        raise invalid("Reference", "Object does not exist", "sha")
    if not fake.may_push(repo, identity, [ref]):
        raise ApiError(403, "Resource not accessible by integration")
    workflows = "1" if identity.permissions.get("workflows") == "write" or not identity.bot else "0"
    hook = subprocess.run([str(repo.path / "hooks" / "pre-receive")], cwd=repo.path,
                          input=f"{old or '0' * 40} {new} {ref}\n".encode(), capture_output=True,
                          env={**GIT_ENV, "GIT_DIR": str(repo.path), "FAKE_GITHUB_WORKFLOWS": workflows})
    if hook.returncode:
        raise ApiError(403, hook.stderr.decode().strip())
    _git(repo, "update-ref", ref, new, *([old] if old else []))
    fake.sync_pull_refs(repo)


@route("POST", "{o_r}/git/refs")
def create_ref(fake, request, identity, owner, name) -> Result:
    repo = access(fake, identity, owner, name, write=True)
    body = request.body or {}
    ref, sha = body.get("ref") or "", body.get("sha") or ""
    if not ref.startswith("refs/") or ref.count("/") < 2:
        raise invalid("Reference", "Reference name must start with 'refs' and have at least two slashes", "ref")
    if _ref_sha(repo, ref) is not None:
        raise invalid("Reference", "Reference already exists")
    _move(fake, identity, repo, ref, None, sha)
    return 201, render_ref(fake, repo, ref, sha), {}


@route("PATCH", "{o_r}/git/refs/(?P<ref>.+)")
def update_ref(fake, request, identity, owner, name, ref) -> Result:
    """Move `ref` to `sha`: a fast-forward, or anything with `force`."""
    repo = access(fake, identity, owner, name, write=True)
    body, ref = request.body or {}, f"refs/{ref}"
    old, sha = _ref_sha(repo, ref), body.get("sha") or ""
    if old is None:
        raise invalid("Reference", "Reference does not exist")
    if not body.get("force") and _kind(repo, sha) == "commit" and subprocess.run(
            ["git", "merge-base", "--is-ancestor", old, sha], cwd=repo.path, env=GIT_ENV).returncode:
        raise invalid("Reference", "Update is not a fast forward")
    _move(fake, identity, repo, ref, old, sha)
    return 200, render_ref(fake, repo, ref, sha), {}
