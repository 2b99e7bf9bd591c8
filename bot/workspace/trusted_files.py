"""Per-repository files the bot trusts, read as blobs from the base commit on the host.

A file such as `.github/decode.yml` decides what runs with network and which
changes may be committed, so it must come from what the repository's
maintainers merged, never from a pull request's head or the agent's tree:
it is read with `git ls-tree` / `git cat-file` from a commit of the host's
clean clone (the default branch for an issue, the PR's base branch for a PR).
Nothing is checked out and no link is followed: a symlink anywhere on the
path (mode 120000) or a file over `MAX_BYTES` is an error naming the file.
"""

from __future__ import annotations

from collections.abc import Callable

from bot.core.errors import ConfigError

MAX_BYTES = 64 * 1024
Git = Callable[..., bytes]  # `Workspace.git`: runs git in the host's clean clone


def read_trusted(git: Git, commit: str, path: str, *, limit: int = MAX_BYTES) -> bytes | None:
    """The blob at `path` in `commit`, or None when there is none; `ConfigError` for a link or a big file."""
    parts = path.split("/")
    for depth in range(1, len(parts) + 1):
        entry = _entry(git, commit, "/".join(parts[:depth]))
        if entry is None:
            return None
        mode, kind, sha, size = entry
        where = f"{path} on {commit[:12]}"
        if mode == "120000":
            raise ConfigError(f"{where}: {'/'.join(parts[:depth])} is a symlink; decode-bot reads this file only "
                              "as a regular file committed at that path, so replace the link with the file")
        if depth < len(parts):
            if kind != "tree":
                return None
            continue
        if kind != "blob":
            raise ConfigError(f"{where} is a {kind}, not a file")
        if size > limit:
            raise ConfigError(f"{where} is {size:,} bytes; the limit is {limit // 1024} KB, so shorten it")
        return git("cat-file", "blob", sha, what=f"reading {path}")
    return None


def _entry(git: Git, commit: str, path: str) -> tuple[str, str, str, int] | None:
    """(mode, type, sha, size) of `path` in `commit` from `git ls-tree -l`, or None when absent."""
    out = git("ls-tree", "-z", "-l", "--full-tree", commit, "--", path, what=f"looking up {path}")
    for record in out.split(b"\0"):
        meta, _, name = record.partition(b"\t")
        if name.decode("utf-8", "surrogateescape") == path:
            mode, kind, sha, size = meta.decode().split()
            return mode, kind, sha, int(size) if size.isdigit() else 0
    return None
