"""Removing a tree the agent wrote in, as `rm -rf` run by its owner would, whatever modes it left.

A sandbox's workspace, HOME and /tmp are the bot's own files when the bot is not root (bwrap, a rootless
Docker engine, the Action's runner), and what ran there can leave directories their owner may not change:
Go's module cache is read-only (0555 directories of 0444 files), `chmod 000 dir` is one command. A plain
`shutil.rmtree(ignore_errors=True)` then leaves them behind, one more tree on the bot's disk after every
run; root is not refused, which is why only a non-root bot ever saw it. `remove_tree` gives each directory
left back to its owner (0700) and removes the tree again.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat

log = logging.getLogger(__name__)


def remove_tree(top: str | os.PathLike[str]) -> None:
    """Delete `top` and everything under it, never raising: what cannot go (a file of another user's) stays,
    and the reason is logged. Links are removed, never followed."""
    shutil.rmtree(top, ignore_errors=True)
    if os.path.lexists(top):  # a directory its owner may not change, or a file not the owner's
        _unlock(top)
        shutil.rmtree(top, ignore_errors=True)
    if os.path.lexists(top):
        try:
            shutil.rmtree(top)  # stops where the pass before did: its error is the reason
        except OSError as e:
            log.warning("could not remove all of %s: %s", top, e)


def _unlock(top: str | os.PathLike[str]) -> None:
    """chmod 0700 every directory under `top` (and `top`), parents first so that each can be listed.

    A path is statted without following links just before its chmod: the sandbox is closed by then, so no
    process of the agent's is left to swap a directory for a link between the two."""
    todo = [os.fspath(top)]
    while todo:
        path = todo.pop()
        try:
            if not stat.S_ISDIR(os.lstat(path).st_mode):
                continue
            os.chmod(path, stat.S_IRWXU)
            with os.scandir(path) as entries:
                todo.extend(e.path for e in entries if e.is_dir(follow_symlinks=False))
        except OSError:
            continue  # not ours to change, or gone: the removal after says what stays
