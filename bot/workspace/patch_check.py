"""The host's check of the agent's patch: what it changes, and which entries the commit leaves out.

The rules for a path, a symlink, a file mode and a Git LFS file are agentd's
own (`bot.sandbox.agentd.paths`, standard library only), so what the sandbox
warns the agent about and what the host decides cannot drift apart. The host
adds what only it knows: the per-file size cap as the patch carries it,
workflow files (`allow_workflow_changes`) and the configured secrets.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

from bot.core.errors import DecodeError
from bot.core.redact import Redactor
from bot.sandbox.agentd.paths import (
    LFS_NEW_REASON,
    LFS_POINTER_MAX,
    LFS_REASON,
    SYMLINK,
    lfs_pointer,
    mode_problem,
    path_problem,
)

MB = 1024 * 1024
REGULAR = ("100644", "100755")
WORKFLOW_REASON = "a workflow file, which would run with the repository's secrets (allow_workflow_changes)"

Git = Callable[..., bytes]  # `Workspace.git`: git(*args, what=, input=, extra_env=) in the clean clone


class PatchRefused(DecodeError):
    """The agent's changes include something the bot will not commit; the message says what."""


def is_workflow_path(path: str) -> bool:
    """Whether committing `path` could add or change a GitHub Actions workflow (any case, or via a link)."""
    lowered = path.lower()
    return lowered in (".github", ".github/workflows") or lowered.startswith(".github/workflows/")


def check_patch(git: Git, redactor: Redactor, patch: bytes, *, max_file_bytes: int | None = None,
                keep_workflows: bool = True) -> tuple[list[str], dict[str, str]]:
    """The paths `patch` changes in the result, and the entries to leave out of it (path -> why).

    The patch is dry-run into a scratch index of the clean clone (`git`), so the
    check sees exactly what git would apply, and then every entry of the
    resulting tree is judged. Left out: a path with a `.git` component (any
    case, NTFS/HFS aliases included), an absolute path or `..`, a nested
    repository (gitlink), an unsupported mode, a file over `max_file_bytes`, a
    symlink that leaves the tree or enters `.git` once resolved against it
    (`link_problem`), a changed or new Git LFS file, and, unless
    `keep_workflows`, workflow files. Whole-patch refusals (`PatchRefused`): a
    configured secret anywhere in the changes (whatever carried it out of the
    environment, none of that work is trusted), and a patch that does not apply
    or whose file sections cannot be told apart. Left-out sections are removed
    and the rest is checked again, until nothing more is found.
    """
    if not patch.strip():
        return [], {}
    if redactor.contains_secret(patch):
        raise PatchRefused("refused: the changes contain a configured secret (a token or key); remove it")
    parts = sections(patch)
    left_out: dict[str, str] = {}
    for names, _ in parts:
        for name in names:
            if (why := path_problem(name)) is not None:
                left_out.setdefault(name, why)
    while True:
        kept = b"".join(body for names, body in parts if not any(n in left_out for n in names))
        paths, found = _judge(git, kept, max_file_bytes, keep_workflows)
        if not found:
            return [p for p in paths if p not in left_out], left_out
        named = {n for names, body in parts for n in names}
        if unmatched := sorted(set(found) - named):
            raise PatchRefused(f"refused: {unmatched[0]} ({found[unmatched[0]]}) is changed by a part of the "
                               "patch that does not name it; the patch cannot be split")
        left_out.update(found)


def _judge(git: Git, patch: bytes, max_file_bytes: int | None,
           keep_workflows: bool) -> tuple[list[str], dict[str, str]]:
    """Apply `patch` to a scratch index; the paths it changes and those to leave out of them."""
    if not patch.strip():
        return [], {}
    with tempfile.TemporaryDirectory(prefix="decode-check-") as tmp:
        index = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        git("read-tree", "HEAD", what="reading the base tree", extra_env=index)
        try:
            git("apply", "--cached", "--binary", "--whitespace=nowarn", "-", what="applying the agent's patch",
                input=patch, extra_env=index)
        except DecodeError as e:
            raise PatchRefused(f"refused: the patch does not apply cleanly: {e.stderr or e}",
                               exit_code=e.exit_code, stderr=e.stderr) from None
        raw = git("diff-index", "--cached", "--raw", "-z", "--no-renames", "--no-abbrev", "HEAD",
                  what="listing the patch", extra_env=index)
        tree = git("ls-files", "--stage", "-z", what="listing the resulting tree", extra_env=index)
        added = [name for meta, name in zip(raw.split(b"\0")[0::2], raw.split(b"\0")[1::2]) if meta.endswith(b" A")]
        attrs = git("check-attr", "--cached", "-z", "--stdin", "filter", what="reading .gitattributes",
                    input=b"".join(name + b"\0" for name in added), extra_env=index) if added else b""
    entries = [(meta.decode().lstrip(":").split(" "), os.fsdecode(name))
               for meta, name in zip(raw.split(b"\0")[0::2], raw.split(b"\0")[1::2])]
    said = attrs.split(b"\0")  # path, attribute, value, ...
    new_lfs = {os.fsdecode(said[i]) for i in range(0, len(said) - 2, 3) if said[i + 2] == b"lfs"}
    olds = [old_sha for (old_mode, _, old_sha, _, _), _ in entries if old_mode in REGULAR]
    sizes = _sizes(git, [new_sha for (_, new_mode, _, new_sha, _), _ in entries if new_mode in REGULAR] + olds)
    small = sorted({sha for sha in olds if sizes[sha] <= LFS_POINTER_MAX})
    pointers = {sha for sha, data in _contents(git, small).items() if lfs_pointer(data) is not None}
    links = _links(git, tree)
    paths, found = [], {}
    for (_, new_mode, old_sha, new_sha, _), path in entries:
        paths.append(path)
        why = path_problem(path)
        if why is None and old_sha in pointers:
            why = LFS_REASON
        elif why is None and path in new_lfs:
            why = LFS_NEW_REASON
        why = why or mode_problem(path, new_mode, links)
        if why is None and new_mode in REGULAR and max_file_bytes is not None and sizes[new_sha] > max_file_bytes:
            why = (f"{sizes[new_sha] / MB:.0f} MB, over the {max_file_bytes / MB:.0f} MB limit for one file "
                   "(DECODE_MAX_FILE_MB)")
        if why is None and not keep_workflows and is_workflow_path(path):
            why = WORKFLOW_REASON
        if why is not None:
            found[path] = why
    return sorted(paths), found


def _links(git: Git, tree: bytes) -> dict[str, str]:
    """Every symlink of the `git ls-files --stage -z` listing `tree`, with its target."""
    link_shas = {}
    for record in filter(None, tree.split(b"\0")):
        meta, _, name = record.partition(b"\t")
        mode, sha, _ = meta.decode().split(" ")
        if mode == SYMLINK:
            link_shas[os.fsdecode(name)] = sha
    targets = _contents(git, sorted(set(link_shas.values())))
    return {path: os.fsdecode(targets[sha]) for path, sha in link_shas.items()}


def _sizes(git: Git, shas: list[str]) -> dict[str, int]:
    """The size of each object in `shas`, without reading them."""
    if not shas:
        return {}
    out = git("cat-file", "--batch-check", what="sizing the changed files",
              input="".join(f"{sha}\n" for sha in shas).encode())
    return {sha: int(size) for sha, _, size in (line.split(" ") for line in out.decode().splitlines())}


def _contents(git: Git, shas: list[str]) -> dict[str, bytes]:
    """The content of each blob in `shas` (small ones: symlink targets, Git LFS pointers)."""
    if not shas:
        return {}
    out, found, at = git("cat-file", "--batch", what="reading small files",
                         input="".join(f"{sha}\n" for sha in shas).encode()), {}, 0
    for sha in shas:
        end = out.index(b"\n", at)
        size = int(out[at:end].split(b" ")[2])
        found[sha], at = out[end + 1 : end + 1 + size], end + 2 + size
    return found


def sections(patch: bytes) -> list[tuple[list[str], bytes]]:
    """The patch cut before each `diff --git` line: the paths each part names, and its bytes.

    Anything before the first such line is dropped. Hunk lines start with a space,
    `+`, `-` or `\\`, and binary data has no space, so the cut never falls inside a file.
    """
    starts = [m.start() for m in re.finditer(rb"^diff --git ", patch, re.M)]
    if patch.strip() and not starts:
        raise PatchRefused("refused: the changes are not a git patch (no 'diff --git' line)")
    return [(_header_paths(patch[a:b]), patch[a:b]) for a, b in zip(starts, [*starts[1:], len(patch)])]


def _header_paths(patch: bytes) -> list[str]:
    """Every path named in the patch's file headers (hunk bodies skipped), for an early, clear refusal."""
    paths, in_header = [], False
    for raw in patch.split(b"\n"):
        line = raw.decode("utf-8", "surrogateescape").rstrip("\r")
        if line.startswith("diff --git "):
            in_header = True
            rest = line[len("diff --git ") :]
            paths += [_strip_side(_unquote(name)) for name in re.findall(r'"(?:[^"\\]|\\.)*"|\S+', rest)]
            n = (len(rest) - 5) // 2  # "a/NAME b/NAME": a name with spaces, as git itself reads it
            if rest.startswith("a/") and len(rest) == 2 * n + 5 and rest[2 : 2 + n] == rest[n + 5 :]:
                paths.append(rest[2 : 2 + n])
        elif line.startswith(("@@", "GIT binary patch")):
            in_header = False
        elif in_header:
            for prefix in ("--- ", "+++ ", "rename from ", "rename to ", "copy from ", "copy to "):
                if line.startswith(prefix):
                    name = _unquote(line[len(prefix) :].rstrip("\t"))
                    if name != "/dev/null":
                        paths.append(_strip_side(name) if prefix in ("--- ", "+++ ") else name)
    return paths


def _strip_side(name: str) -> str:
    return name[2:] if name[:2] in ("a/", "b/") else name


def _unquote(name: str) -> str:
    """Git's C-style quoting of unusual path names ("a/t\\303\\244st")."""
    if len(name) < 2 or not (name.startswith('"') and name.endswith('"')):
        return name
    raw = name[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape").encode("latin-1")
    return raw.decode("utf-8", "surrogateescape")
