"""The run's commit as GitHub's Git Database API can make it, so that GitHub signs it.

GitHub marks a commit verified when a GitHub App or bot makes it through the API with "no custom
author information, custom committer information, and no custom signature information"
(https://docs.github.com/en/authentication/managing-commit-signature-verification/about-commit-signature-verification#signature-verification-for-bots).
So the clean clone's commit is read back here as what the API takes (its changed paths with their
modes and contents, its parent, its message, byte for byte) and `publish` makes it through the `Forge`
(a tree on the parent's tree with text files inline, in as few requests as bot/github/git_tree.py makes; a
blob only for each file that is not text; the commit; the branch ref), with no author or committer: GitHub
records the token's identity (the App's `name[bot]`, or `github-actions[bot]` for the Action's token).
So a change of any number of text files is four content-creating requests, not one per file.

What the API cannot carry goes by `git push` as before, unsigned, with a note saying why: a file over
`API_FILE_LIMIT`, a submodule (gitlink) entry, a commit that is not one commit on top of the run's base.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Generator
from typing import IO

from bot.core.errors import DecodeError
from bot.github.info import NewCommit, TreeEntry
from bot.workspace.clone import Workspace, git_env

API_FILE_LIMIT = 20 * 1024 * 1024  # bytes of one file; GitHub takes blobs up to 100 MB, sent base64 in one request
MODES = {"100644", "100755", "120000"}
_DELETED = "000000"


def read_commit(ws: Workspace, commit: str, *, limit: int = API_FILE_LIMIT) -> NewCommit | str:
    """`commit` of the clean clone as a `NewCommit`, or one line on why the API cannot make it. A few git
    processes whatever the number of files: the contents come from one `git cat-file --batch`."""
    parents = ws.git("rev-list", "--parents", "-n", "1", commit, what="reading the commit").decode().split()[1:]
    if parents != [ws.base_sha]:
        return "the commit is not one commit on top of the run's base"
    diff = ws.git("diff-tree", "-r", "-z", "--no-renames", "--no-commit-id", ws.base_sha, commit,
                  what="listing the commit's changes").split(b"\0")
    changed: list[tuple[str, str, str | None]] = []  # path, mode, blob sha (None: deleted)
    for meta, path_bytes in zip(diff[0::2], diff[1::2]):
        _, mode, _, sha, _ = meta.decode().lstrip(":").split(" ")
        try:
            path = path_bytes.decode("utf-8")
        except UnicodeDecodeError:
            return f"the path {path_bytes!r} is not UTF-8, which the API's JSON cannot carry"
        if mode != _DELETED and mode not in MODES:
            return f"`{path}` is a submodule entry (mode {mode}), which the API does not take"
        changed.append((path, mode, None if mode == _DELETED else sha))
    objects = _cat_files(ws, [commit, *(sha for _, _, sha in changed if sha)], limit=limit)
    _, raw = next(objects)
    assert raw is not None  # a commit object is far under any limit
    entries = []
    for path, mode, blob in changed:
        if blob is None:
            entries.append(TreeEntry(path, "100644", None))
            continue
        size, content = next(objects)
        if content is None:
            objects.close()
            return f"`{path}` is {size / 2**20:.1f} MB, over the {limit / 2**20:.0f} MB decode-bot sends through the API"
        entries.append(TreeEntry(path, mode, content, blob))
    objects.close()
    head, message = raw.split(b"\n\n", 1)
    tree = head.split(b"\n", 1)[0].removeprefix(b"tree ").decode()
    parent_tree = ws.git("rev-parse", f"{ws.base_sha}^{{tree}}", what="reading the trees").decode().strip()
    return NewCommit(parent=ws.base_sha, parent_tree=parent_tree, message=message.decode("utf-8"),
                     entries=tuple(entries), tree=tree)


def _cat_files(ws: Workspace, shas: list[str], *, limit: int) -> Generator[tuple[int, bytes | None], None, None]:
    """(size, content) of each object of `shas`, in order, from one `git cat-file --batch` that streams them;
    the content is None for one over `limit` bytes, which is never read whole. Closing the iterator ends git."""
    proc = subprocess.Popen(["git", "cat-file", "--batch"], cwd=ws.clean, env=git_env(), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    feed = threading.Thread(target=_feed, args=(proc.stdin, shas), daemon=True)  # the pipe may fill both ways
    feed.start()
    try:
        for sha in shas:
            header = proc.stdout.readline().split()
            if len(header) != 3:
                raise DecodeError(f"reading the commit failed: git has no object {sha[:12]}")
            size = int(header[2])
            if size > limit:
                yield size, None
                return
            content = proc.stdout.read(size)
            proc.stdout.read(1)  # the newline after each object
            yield size, content
    finally:
        proc.kill()
        proc.wait()
        feed.join()


def _feed(stdin: IO[bytes], shas: list[str]) -> None:
    try:
        stdin.write("".join(f"{sha}\n" for sha in shas).encode())
        stdin.close()
    except (BrokenPipeError, ValueError):  # git was ended early (a file over the limit)
        pass


def unsigned_note(why: str) -> str:
    """The PR body's and the tracking comment's note for a commit pushed with git instead."""
    return (f"**Unsigned commit:** pushed with git, so GitHub does not mark it verified: {why}. A branch that "
            "requires signed commits will not take it as it is.")
