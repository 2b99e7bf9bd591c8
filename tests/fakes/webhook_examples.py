"""GitHub's own webhook payload examples: npm `@octokit/webhooks-examples`, pinned.

The tarball is fetched once from npm's configured registry (the address `npm
view` gives, read with Python's urllib, falling back to `npm pack`), checked against the registry's sha512 integrity, and cached
under ``$XDG_CACHE_HOME/decode-bot`` (default ``~/.cache/decode-bot``). A fetch
that fails is a test failure with the reason, never a skip.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

PACKAGE = "@octokit/webhooks-examples"
VERSION = "7.6.1"
INTEGRITY = "sha512-De6U3XB6O3DtCa7bKgCMzTHdeopqqZ6SNivMYJnK65ierKL1AnNIA0tkRYCRS7lwGT792d+Ps1WbfHlso6MynQ=="
HOSTS = ("api.github.com", "ghes-31", "ghes-32", "ghes-33", "ghes-34", "ghes-35")
# A live delivery's objects carry the time of the event, and the server refuses one older than its replay
# window; `example` dates the examples (from 2019) to the start of the test session unless told `at`, the
# same for every call, so two calls still give the same body.
SESSION_TIME = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
DATED = ("comment", "review", "issue", "pull_request", "check_suite")


class ExamplesUnavailable(RuntimeError):
    """The examples package could not be fetched or read; the message says why."""


def cache_dir() -> Path:
    """Where the extracted package lives between test runs."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "decode-bot" / f"webhooks-examples-{VERSION}"


def examples(host: str = "api.github.com") -> list[tuple[str, dict[str, Any]]]:
    """Every (event name, payload) example for `host` (``api.github.com`` or ``ghes-3x``)."""
    return [(name, json.loads(json.dumps(p))) for name, p in _load(host)]


def example(event: str, action: str | None = None, *, repo: str | None = None, sender: str | None = None,
            sender_type: str | None = None, at: str = SESSION_TIME, **changes: Any) -> dict[str, Any]:
    """A copy of the first example of `event` (with `action`), rewritten for a test and dated now.

    `repo` ("owner/name") replaces the repository, `sender` and `sender_type` the
    sender, `at` (ISO 8601) the times of the objects the event acts on, and each
    `a__b=value` sets payload["a"]["b"].
    """
    payload = next(p for name, p in examples() if name == event and (action is None or p.get("action") == action))
    for target in (payload.get(name) for name in DATED):
        for field in ("created_at", "updated_at", "submitted_at"):
            if isinstance(target, dict) and target.get(field):
                target[field] = at
    if repo is not None:
        owner, name = repo.split("/", 1)
        payload["repository"].update(full_name=repo, name=name, owner={**payload["repository"]["owner"], "login": owner})
    if sender is not None:
        payload["sender"] = {**payload["sender"], "login": sender}
    if sender_type is not None:
        payload["sender"] = {**payload["sender"], "type": sender_type}
    for path, value in changes.items():
        target = payload
        *parents, leaf = path.split("__")
        for key in parents:
            target = target[key]
        target[leaf] = value
    return payload


def all_examples() -> list[tuple[str, str, dict[str, Any]]]:
    """Every (host, event name, payload) example in the package, all hosts."""
    return [(host, name, payload) for host in HOSTS for name, payload in examples(host)]


@functools.lru_cache(maxsize=None)
def _load(host: str) -> tuple[tuple[str, dict[str, Any]], ...]:
    index = _ensure() / host / "index.json"
    try:
        events = json.loads(index.read_text())
    except (OSError, ValueError) as exc:
        raise ExamplesUnavailable(f"cannot read {index}: {exc}; delete {cache_dir()} and rerun") from exc
    return tuple((event["name"], payload) for event in events for payload in event["examples"])


def _ensure() -> Path:
    target = cache_dir()
    if (target / "api.github.com" / "index.json").is_file():
        return target
    data = _download()
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=".extract-"))
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            for member in tar.getmembers():
                parts = Path(member.name).parts  # "package/<host>/index.json"
                if member.isfile() and len(parts) == 3 and parts[1] in HOSTS and parts[2] == "index.json":
                    out = staging / parts[1] / "index.json"
                    out.parent.mkdir(parents=True, exist_ok=True)
                    out.write_bytes(tar.extractfile(member).read())  # type: ignore[union-attr]
        if not (staging / "api.github.com" / "index.json").is_file():
            raise ExamplesUnavailable(f"{PACKAGE}@{VERSION} has no api.github.com/index.json")
        try:
            staging.rename(target)
        except OSError:  # another process won the race
            if not (target / "api.github.com" / "index.json").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _download() -> bytes:
    errors: list[str] = []
    try:
        url = subprocess.run(["npm", "view", f"{PACKAGE}@{VERSION}", "dist.tarball"], check=True,
                             capture_output=True, text=True, timeout=120).stdout.strip()
        with urllib.request.urlopen(url, timeout=60) as response:
            data = response.read()
        _verify(data)
        return data
    except (OSError, ValueError, subprocess.SubprocessError, ExamplesUnavailable) as exc:
        detail = getattr(exc, "stderr", "") or exc
        errors.append(f"npm view + urllib: {detail}")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(
                ["npm", "pack", f"{PACKAGE}@{VERSION}", "--silent"],
                cwd=tmp, check=True, capture_output=True, text=True, timeout=120,
            )
            (tarball,) = Path(tmp).glob("*.tgz")
            data = tarball.read_bytes()
        _verify(data)
        return data
    except (OSError, ValueError, subprocess.SubprocessError, ExamplesUnavailable) as exc:
        detail = getattr(exc, "stderr", "") or exc
        errors.append(f"npm pack: {detail}")
    raise ExamplesUnavailable(
        f"cannot fetch {PACKAGE}@{VERSION} (needs network access to npm's registry, `npm config get registry`): " + "; ".join(errors)
    )


def _verify(data: bytes) -> None:
    digest = "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()
    if digest != INTEGRITY:
        raise ExamplesUnavailable(f"{PACKAGE}@{VERSION} tarball integrity {digest} != pinned {INTEGRITY}")
