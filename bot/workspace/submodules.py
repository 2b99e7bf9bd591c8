"""Submodules in a run's two clones: checked out where the host can fetch them, and copied for the sandbox.

The clean clone checks its submodules out recursively with the clone's
hardened environment (hooks off, no global config, the token sent to the
repository's own host only, the file protocol allowed only when the
repository itself is a local path). A submodule that cannot be fetched stays
empty and is named in the notes `check_out` returns; the run goes on.

The sandbox's copy gets its submodules from the clean clone's, over `file://`
(a full copy, never hardlinks, no network) and without any URL the repository
chose: each one's URL is pointed at the clean clone's checkout, and after the
copy its remote is removed, as the copy's own is. The hand-back never carries
changes inside a submodule (`bot.sandbox.agentd.submodules`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

from bot.core.errors import DecodeError

Run = Callable[..., bytes]  # workspace._git with the run's redactor: (args, cwd, env, *, what, ok) -> stdout


def gitlinks(repo: Path, env: Mapping[str, str], run: Run) -> list[str]:
    """The paths of the submodules (gitlinks) in `repo`'s index."""
    out = run(["ls-files", "--stage", "-z"], repo, env, what="listing submodules")
    paths = []
    for record in filter(None, out.split(b"\0")):
        meta, _, name = record.partition(b"\t")
        if meta.startswith(b"160000 "):
            paths.append(os.fsdecode(name))
    return paths


def names(repo: Path, env: Mapping[str, str], run: Run) -> dict[str, str]:
    """path -> name of each submodule `repo`'s .gitmodules declares."""
    if not (repo / ".gitmodules").is_file():
        return {}
    out = run(["config", "-z", "-f", ".gitmodules", "--get-regexp", r"^submodule\..*\.path$"], repo, env,
              what="reading .gitmodules", ok=(0, 1))
    found = {}
    for record in filter(None, out.split(b"\0")):
        key, _, value = os.fsdecode(record).partition("\n")
        found[value] = key[len("submodule.") : -len(".path")]
    return found


def check_out(clean: Path, env: Mapping[str, str], run: Run) -> list[str]:
    """Check out every submodule of `clean` recursively; a note for each one that could not be."""
    notes = []
    for path in gitlinks(clean, env, run):
        try:
            run(["submodule", "update", "--init", "--recursive", "--", path], clean, env,
                what=f"checking out the submodule {path}")
        except DecodeError as e:
            notes.append(f"the submodule {path} could not be checked out, so it is empty in the workspace: {e}")
    return notes


def copy(source: Path, target: Path, env: Mapping[str, str], run: Run, within: str = "") -> list[str]:
    """Give `target` (the sandbox's copy) the submodules checked out in `source`, recursively, from `source`;
    a note for each one that could not be copied (it stays empty)."""
    declared, notes = names(target, env, run), []
    for path in gitlinks(target, env, run):
        origin, name = source / path, declared.get(path)
        if name is None or not (origin / ".git").exists():
            continue  # never checked out on the host: stays an empty directory
        what = f"copying the submodule {within}{path}"
        try:
            url = run(["config", "-f", ".gitmodules", f"submodule.{name}.url"], target, env, what=what, ok=(0, 1))
            run(["config", f"submodule.{name}.url", origin.resolve().as_uri()], target, env, what=what)
            run(["submodule", "update", "--init", "--", path], target, env, what=what)
            run(["config", f"submodule.{name}.url", url.decode().strip() or path], target, env, what=what)
            run(["remote", "remove", "origin"], target / path, env, what=what)
        except DecodeError as e:
            notes.append(f"the submodule {within}{path} could not be copied into the workspace, so it is empty "
                         f"there: {e}")
            continue
        notes += copy(origin, target / path, env, run, f"{within}{path}/")
    return notes
