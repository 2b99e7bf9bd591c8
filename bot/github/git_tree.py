"""A commit's changes as GitHub's "create a tree" requests take them
(https://docs.github.com/en/rest/git/trees#create-a-tree): text files inline (`content`), the rest by the
blob sha git computed (sent before as blobs), a deletion as `sha: null`; split so that one request carries at
most about `TREE_REQUEST_BYTES` of contents, each next request built on the tree the last one made.
"""

from __future__ import annotations

import json

from bot.github.info import TreeEntry

TREE_REQUEST_BYTES = 8 * 1024 * 1024  # of inline contents in one "create a tree" request; more go in the next


def inline_text(content: bytes) -> str | None:
    """`content` as the tree request's inline `content` when it is text (UTF-8 without NUL); None for the
    rest, which goes as a base64 blob since JSON strings carry Unicode text, not bytes."""
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return None if "\0" in text else text


def tree_parts(entries: tuple[TreeEntry, ...], *, budget: int = TREE_REQUEST_BYTES) -> list[list[dict]]:
    """The commit's entries as "create a tree" elements (https://docs.github.com/en/rest/git/trees#create-a-tree),
    split so that each request carries at most about `budget` bytes of inline content: text inline, other
    files by the blob sha git computed (sent before as blobs), a deletion as `sha: null`."""
    parts: list[list[dict]] = [[]]
    used = 0
    for entry in entries:
        element: dict = {"path": entry.path, "mode": entry.mode, "type": "blob"}
        text = None if entry.content is None else inline_text(entry.content)
        if text is not None:
            element["content"] = text
        else:
            element["sha"] = entry.sha if entry.content is not None else None
        size = len(json.dumps(element))
        if parts[-1] and used + size > budget:
            parts.append([])
            used = 0
        parts[-1].append(element)
        used += size
    return parts
