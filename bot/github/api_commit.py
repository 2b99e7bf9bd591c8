"""The run's commit as GitHub's Git Database API can make it, so that GitHub signs it.

GitHub marks a commit verified when a GitHub App or bot makes it through the API with "no custom
author information, custom committer information, and no custom signature information"
(https://docs.github.com/en/authentication/managing-commit-signature-verification/about-commit-signature-verification#signature-verification-for-bots).
So the clean clone's commit is read back here as what the API takes (its changed paths with their
modes and contents, its parent, its message, byte for byte) and `publish` makes it through the `Forge`
(blobs, a tree on the parent's tree, the commit, the branch ref), with no author or committer: GitHub
records the token's identity (the App's `name[bot]`, or `github-actions[bot]` for the Action's token).

What the API cannot carry goes by `git push` as before, unsigned, with a note saying why: a file over
`API_FILE_LIMIT`, a submodule (gitlink) entry, a commit that is not one commit on top of the run's base.
"""

from __future__ import annotations

from bot.github.info import NewCommit, TreeEntry
from bot.workspace.clone import Workspace

API_FILE_LIMIT = 20 * 1024 * 1024  # bytes of one file; GitHub takes blobs up to 100 MB, sent base64 in one request
MODES = {"100644", "100755", "120000"}
_DELETED = "000000"


def read_commit(ws: Workspace, commit: str, *, limit: int = API_FILE_LIMIT) -> NewCommit | str:
    """`commit` of the clean clone as a `NewCommit`, or one line on why the API cannot make it."""
    parents = ws.git("rev-list", "--parents", "-n", "1", commit, what="reading the commit").decode().split()[1:]
    if parents != [ws.base_sha]:
        return "the commit is not one commit on top of the run's base"
    raw = ws.git("cat-file", "commit", commit, what="reading the commit")
    message = raw.split(b"\n\n", 1)[1].decode("utf-8")
    diff = ws.git("diff-tree", "-r", "-z", "--no-renames", "--no-commit-id", ws.base_sha, commit,
                  what="listing the commit's changes").split(b"\0")
    entries = []
    for meta, path_bytes in zip(diff[0::2], diff[1::2]):
        _, mode, _, sha, _ = meta.decode().lstrip(":").split(" ")
        try:
            path = path_bytes.decode("utf-8")
        except UnicodeDecodeError:
            return f"the path {path_bytes!r} is not UTF-8, which the API's JSON cannot carry"
        if mode == _DELETED:
            entries.append(TreeEntry(path, "100644", None))
            continue
        if mode not in MODES:
            return f"`{path}` is a submodule entry (mode {mode}), which the API does not take"
        size = int(ws.git("cat-file", "-s", sha, what="sizing a file").decode())
        if size > limit:
            return f"`{path}` is {size / 2**20:.1f} MB, over the {limit / 2**20:.0f} MB decode-bot sends through the API"
        entries.append(TreeEntry(path, mode, ws.git("cat-file", "blob", sha, what="reading a file")))
    trees = ws.git("rev-parse", f"{ws.base_sha}^{{tree}}", f"{commit}^{{tree}}", what="reading the trees").split()
    return NewCommit(parent=ws.base_sha, parent_tree=trees[0].decode(), message=message, entries=tuple(entries),
                     tree=trees[1].decode())


def unsigned_note(why: str) -> str:
    """The PR body's and the tracking comment's note for a commit pushed with git instead."""
    return (f"**Unsigned commit:** pushed with git, so GitHub does not mark it verified: {why}. A branch that "
            "requires signed commits will not take it as it is.")
