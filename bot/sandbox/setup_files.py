"""What every caching backend runs inside its sandbox to keep and give back the files setup left.

The setup cache (bot/run/setup_cache.py) keeps, per backend, what the backend can keep of a sandbox
(docker: a committed image; modal: a `snapshot_filesystem()` image; bwrap: nothing, the host's root
being read-only) plus an archive of setup's files in the places that image does not hold. The
archive is made and unpacked inside the sandbox, as its user, by the two scripts below, so that a
symlink setup planted is never followed on the host; the host only checks the archive's headers
(`setup_cache.archive_problem`) between the two.

The archive is a tar with entries under `workspace/` (the untracked and ignored paths
`git status --porcelain --ignored` lists: `node_modules/`, `*.egg-info`, a `.venv`) and, where HOME
is not in the backend's image, under `home/` (HOME but its `.cache`). Walked by hand, so no entry
is a hard link (the host refuses those). A path that is or holds a mount point is left out: it is the
sandbox's own (bwrap binds the harness's Python back at its host path, which under a host /tmp lands in
the sandbox's HOME), never what setup made.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from bot.core.errors import ConfigError, SandboxError

TAG = "decode-setup-cache"  # an entry's image is `decode-setup-cache:<key>` (modal: `...:<key>@<image id>`)


class Saved(NamedTuple):
    """What `save_setup_cache` kept: the bytes it takes, and the image a later `Launcher(spec)` starts
    from when `spec.image` is `image` (for docker and bwrap the tag it was given)."""

    size: int
    image: str


def cache_image_id(image: str) -> str | None:
    """The backend's image id in a setup cache entry's image (modal: `decode-setup-cache:<key>@<id>`), else
    None (not an entry's image)."""
    if not image.startswith(TAG + ":"):
        return None
    found = image.rpartition("@")[2]
    if "@" not in image or not found:
        raise ConfigError(f"the image {image} names a setup cache entry without its Modal image")
    return found


_SAVE = r"""
import os, re, subprocess, sys, tarfile
workspace, with_home = %r, %r
try:  # what the sandbox mounted (bwrap binds the harness's Python back under a HOME of /tmp): never setup's
    with open("/proc/self/mountinfo", "rb") as info:
        mounts = {re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), line.split()[4])
                  .decode("utf-8", "surrogateescape") for line in info}
except OSError:
    mounts = set()
def kept(path):
    return not any(m == path or m.startswith(path + "/") for m in mounts)
out = subprocess.run(["git", "-c", "core.fsmonitor=false", "status", "--porcelain", "--ignored", "-z",
                      "--untracked-files=normal"], cwd=workspace, capture_output=True, check=True).stdout
paths = sorted(e[3:].rstrip("/") for e in out.decode("utf-8", "surrogateescape").split("\0") if e[:3] in ("?? ", "!! "))
tops = [("workspace/" + p, os.path.join(workspace, p)) for p in paths]
if with_home:
    home = os.environ["HOME"]
    tops += [("home/" + n, os.path.join(home, n)) for n in sorted(os.listdir(home)) if n != ".cache"]
tops = [(name, full) for name, full in tops if kept(full)]
with tarfile.open(fileobj=sys.stdout.buffer, mode="w|", format=tarfile.PAX_FORMAT) as tar:
    def add(name, full):
        tar.inodes.clear()
        tar.add(full, arcname=name, recursive=False)
    for name, full in tops:
        add(name, full)
        if os.path.isdir(full) and not os.path.islink(full):
            for parent, dirs, files in os.walk(full):
                dirs.sort()
                for entry in dirs + sorted(files):
                    path = os.path.join(parent, entry)
                    add(name + path[len(full):], path)
"""

_RESTORE = r"""
import os, sys, tarfile
roots = {"workspace": %r, "home": os.environ["HOME"]}
with tarfile.open(fileobj=sys.stdin.buffer, mode="r|") as tar:
    for member in tar:
        top, _, rel = member.name.partition("/")
        parts = rel.split("/")
        if top not in roots or not rel or member.name.startswith("/") or ".." in parts:
            sys.exit("refused " + repr(member.name))
        here = roots[top]
        for part in parts:
            here = os.path.join(here, part)
            if os.path.islink(here):
                sys.exit("refused " + repr(member.name) + ": it would go through or over a symlink")
        member.name = rel
        tar.extract(member, roots[top], **({"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}))
"""


def save_script(workspace: str, *, home: bool = True) -> str:
    """Python (3.8+, standard library) that writes setup's files in `workspace`, and HOME unless `home` is
    False (the backend's image holds it), to stdout as the archive."""
    return _SAVE % (workspace, home)


def restore_script(workspace: str) -> str:
    """Python that unpacks an archive the host checked from stdin into `workspace` and HOME, refusing any
    entry that would leave its root or go through or over a symlink (the second line of defence)."""
    return _RESTORE % (workspace,)


def write_capped(chunks: Iterable[bytes], archive: Path, used: int, cap_bytes: int) -> int:
    """Write `chunks` to `archive`; returns `used` plus their length. Raises `SandboxError` once that passes
    `cap_bytes` (the caller stops the writer and keeps nothing)."""
    with archive.open("wb") as out:
        for chunk in chunks:
            used += len(chunk)
            if used > cap_bytes:
                raise SandboxError(f"setup left {used >> 20} MB or more, over the cache's "
                                   f"{cap_bytes >> 20} MB (DECODE_SETUP_CACHE_MB)")
            out.write(chunk)
    return used


def save_locally(argv: list[str], env: dict[str, str], archive: Path, used: int, cap_bytes: int) -> int:
    """Run `argv` (a save script in the sandbox: bwrap, or `docker exec`) and write its stdout to `archive` within
    `cap_bytes`."""
    with subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        stdout = proc.stdout
        try:
            used = write_capped(iter(lambda: stdout.read(1 << 20), b""), archive, used, cap_bytes)
        except SandboxError:
            proc.kill()
            raise
        err = proc.stderr.read()
    if proc.returncode != 0:
        raise SandboxError(f"archiving setup's files failed: {err.decode(errors='replace').strip()[-300:]}")
    return used


def restore_locally(argv: list[str], env: dict[str, str], archive: Path) -> None:
    """Run `argv` (a restore script in the sandbox: bwrap, or `docker exec -i`) with the archive on its stdin."""
    with archive.open("rb") as data:
        res = subprocess.run(argv, env=env, stdin=data, capture_output=True, timeout=600)
    if res.returncode != 0:
        raise SandboxError(f"restoring setup's files failed: {res.stderr.decode(errors='replace').strip()[-300:]}")
