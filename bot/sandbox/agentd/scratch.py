"""Throwaway git dirs for the hand-back: git run on the workspace without reading anything the agent planted.

A scratch git dir borrows a repository's objects (alternates) and nothing
else, so the config, hooks, fsmonitor and filters in the workspace's .git are
never read or run; every command also turns hooks and fsmonitor off itself.
"""

from __future__ import annotations

import os
import subprocess
from typing import IO

# Untracked build droppings never worth a commit, even when the repo's .gitignore forgets them.
EXPORT_EXCLUDES = ("__pycache__/", "*.py[co]", ".pytest_cache/", ".mypy_cache/", ".ruff_cache/", ".tox/",
                   "node_modules/", ".DS_Store")


def scratch_repo(tmp: str, objects: list, worktree: str) -> dict:
    """Make a bare git dir in `tmp` that borrows the object stores `objects`; the environment that runs
    git on `worktree` with it and an index of its own. Raises CalledProcessError when git cannot make it."""
    gitdir = os.path.join(tmp, "git")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": tmp,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
    }
    subprocess.run(["git", "init", "-q", "--bare", gitdir], env=env, cwd=tmp, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    with open(os.path.join(gitdir, "objects", "info", "alternates"), "w") as f:
        f.write("".join(d + "\n" for d in objects))
    with open(os.path.join(gitdir, "info", "exclude"), "w") as f:
        f.write("\n".join(EXPORT_EXCLUDES) + "\n")
    env.update(GIT_DIR=gitdir, GIT_WORK_TREE=worktree, GIT_INDEX_FILE=os.path.join(tmp, "index"))
    return env


def run_git(args: list, env: dict, cwd: str, input: bytes | None = None,
            stdout: int | IO[bytes] = subprocess.PIPE) -> subprocess.CompletedProcess:
    """One git command with hooks and fsmonitor off; its stderr is captured."""
    return subprocess.run(["git", "-c", "core.hooksPath=" + os.devnull, "-c", "core.fsmonitor=false"] + list(args),
                          env=env, cwd=cwd, stdout=stdout, stderr=subprocess.PIPE, input=input)


def split_z(data: bytes) -> list:
    """The NUL-separated names of a `git ... -z` answer."""
    return [os.fsdecode(p) for p in data.split(b"\0") if p]


def zip_z(data: bytes) -> list:
    """`git ls-files -s -z` records as (meta, path)."""
    out = []
    for record in data.split(b"\0"):
        if record:
            meta, _, path = record.partition(b"\t")
            out.append((meta.decode(), os.fsdecode(path)))
    return out
