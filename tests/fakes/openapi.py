"""GitHub's own REST description as a route checker for the fake GitHub.

The description is npm `@octokit/openapi` (https://github.com/octokit/openapi),
pinned below and fetched with `npm pack` on first use. Only its (method, path
template) pairs are kept, in a small JSON file next to the tarball, so later
runs do not parse the 13 MB description again. A fetch that fails raises
`OpenApiUnavailable`: the tests that need it fail, they are never skipped.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tarfile
from pathlib import Path

OCTOKIT_OPENAPI_VERSION = "23.0.2"
DESCRIPTION = "package/generated/api.github.com.json"
METHODS = ("get", "put", "post", "patch", "delete", "head", "options")
# Parameters GitHub lets span several path segments (branch names with "/",
# file paths, "heads/feature/x" refs, "base...head" comparisons).
MULTI_SEGMENT = {"path", "ref", "branch", "basehead", "file_path", "name"}


class OpenApiUnavailable(RuntimeError):
    """The pinned description could not be fetched or read."""


def cache_dir() -> Path:
    """Where the tarball and the parsed templates live (git-ignored, outside the repo)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "decode-bot"


class OpenApiRoutes:
    """The (METHOD, template) pairs of api.github.com; `match` finds a request's template."""

    def __init__(self, operations: list[tuple[str, str]], version: str = OCTOKIT_OPENAPI_VERSION) -> None:
        self.version = version
        self.operations = operations
        self._compiled: dict[str, list[tuple[re.Pattern[str], str]]] = {}
        for method, template in operations:
            self._compiled.setdefault(method.upper(), []).append((_compile(template), template))

    def match(self, method: str, path: str) -> str | None:
        """The template that `method path` (no API prefix, no query) matches, or None."""
        path = path.split("?", 1)[0].rstrip("/") or "/"
        method = "GET" if method.upper() == "HEAD" else method.upper()
        found = [template for pattern, template in self._compiled.get(method, []) if pattern.fullmatch(path)]
        # The most literal template wins: /repos/{o}/{r}/pulls/comments/{id} over .../pulls/{n}/...
        return min(found, key=lambda t: (t.count("{"), -len(t))) if found else None


def _compile(template: str) -> re.Pattern[str]:
    parts = re.split(r"(\{[^}]+\})", template)
    regex = "".join(
        (".+" if p[1:-1] in MULTI_SEGMENT else "[^/]+") if p.startswith("{") else re.escape(p) for p in parts
    )
    return re.compile(regex)


def load_routes(version: str = OCTOKIT_OPENAPI_VERSION, directory: Path | None = None) -> OpenApiRoutes:
    """The routes of `@octokit/openapi@version`, fetched and parsed once, then read from the cache."""
    directory = directory or cache_dir()
    parsed = directory / f"octokit-openapi-{version}.routes.json"
    if parsed.exists():
        return OpenApiRoutes([tuple(op) for op in json.loads(parsed.read_text())], version)
    tarball = _fetch(version, directory)
    try:
        with tarfile.open(tarball) as archive:
            member = archive.extractfile(DESCRIPTION)
            assert member is not None
            description = json.load(member)
    except (tarfile.TarError, KeyError, ValueError, AssertionError) as error:
        raise OpenApiUnavailable(f"{tarball} has no readable {DESCRIPTION}: {error!r}; delete it and rerun") from error
    operations = sorted(
        (method.upper(), template)
        for template, item in description["paths"].items()
        for method in item
        if method in METHODS
    )
    tmp = parsed.with_suffix(".tmp")
    tmp.write_text(json.dumps(operations))
    tmp.replace(parsed)
    return OpenApiRoutes(operations, version)


def _fetch(version: str, directory: Path) -> Path:
    tarball = directory / f"octokit-openapi-{version}.tgz"
    if tarball.exists():
        return tarball
    directory.mkdir(parents=True, exist_ok=True)
    command = ["npm", "pack", f"@octokit/openapi@{version}", "--pack-destination", str(directory)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise OpenApiUnavailable(f"cannot run `{' '.join(command)}`: {error}") from error
    if done.returncode != 0 or not tarball.exists():
        raise OpenApiUnavailable(
            f"`{' '.join(command)}` failed (exit {done.returncode}): {done.stderr.strip()[-500:]}; "
            "the fake GitHub checks every request against this description and cannot run without it"
        )
    return tarball
