"""The repository a command names with --repo: a local path, owner/name, or a URL on GitHub."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.parse
from pathlib import Path

from bot.config import Settings
from bot.core.errors import ConfigError


def local_repository(path: Path, base: str | None = None, *, warn: bool = True) -> str:
    """The top level of the git repository holding `path` (a subdirectory is fine), warning (`warn`) about
    uncommitted changes.

    A folder outside any repository, a repository without commits, or a `base` that is none of its branches,
    tags or commits is a ConfigError: bad input, refused before the model is asked or a run directory made.
    """
    env = {k: v for k, v in os.environ.items() if k not in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE",
                                                            "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY")}

    def git(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", "-C", str(path), *argv], capture_output=True, text=True, env=env)

    bare = git("rev-parse", "--is-bare-repository")
    if bare.returncode != 0 or not path.is_dir():
        raise ConfigError(f"{path} is not in a git repository: give a repository's path, owner/name or a git URL")
    is_bare = bare.stdout.strip() == "true"
    top = git("rev-parse", "--absolute-git-dir" if is_bare else "--show-toplevel").stdout.strip()
    if not git("rev-list", "-n", "1", "--all").stdout.strip():
        raise ConfigError(f"the repository {top} has no commits yet: commit something for the agent to start from")
    if base is not None and not any(git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").stdout.strip()
                                    for ref in (f"refs/heads/{base}", f"refs/tags/{base}", base)):
        raise ConfigError(f"--base {base}: no branch, tag or commit of {top} has that name: give one of its "
                          "branches (git branch), tags or commits")
    if warn and not is_bare and git("status", "--porcelain").stdout.strip():
        print(f"decode: warning: uncommitted changes in {top} are not part of the run (it starts from committed "
              "history): commit them first to include them", file=sys.stderr, flush=True)
    return top


def github_clone_url(repo: str, settings: Settings) -> tuple[str, str | None]:
    """Where to clone GitHub's `repo` from, and the token to clone with (None: anonymous, public repositories)."""
    if settings.github.token or settings.github.app_id:
        from bot.github.auth import credentials_from
        from bot.github.forge import GitHubForge

        forge = GitHubForge(credentials_from(settings.github))
        return forge.repository(repo).clone_url, forge.token_for(repo)
    api = urllib.parse.urlsplit(settings.github.api_url)
    if api.hostname == "api.github.com":
        return f"https://github.com/{repo}.git", None
    return f"{api.scheme}://{api.netloc}{api.path.removesuffix('/api/v3')}/{repo}.git", None  # GitHub Enterprise


def github_repo_name(repo: str, api_url: str = "https://api.github.com") -> str | None:
    """"owner/name" for `owner/name` or a URL on GitHub (or the GITHUB_API_URL host), else None."""
    if re.fullmatch(r"[A-Za-z0-9][\w-]*/[\w.-]+", repo):
        return repo.removesuffix(".git")
    parts = urllib.parse.urlsplit(repo)
    api_host = urllib.parse.urlsplit(api_url).hostname or ""
    if parts.scheme not in ("http", "https") or parts.hostname not in {"github.com", api_host,
                                                                        api_host.removeprefix("api.")}:
        return None
    match = re.fullmatch(r"/(?:.*/)?([\w.-]+)/([\w.-]+?)(?:\.git)?/?", parts.path)
    return f"{match.group(1)}/{match.group(2)}" if match else None
