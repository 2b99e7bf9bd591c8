"""The repository's `setup:` commands (.github/decode.yml), run in a fresh sandbox before the agent: by the
pipeline (again in each sandbox that replaces a dead one, bot/run/restart.py) and by `decode eval`; and the
run's plan for the setup cache (bot/run/setup_cache.py) that may stand in for them."""

from __future__ import annotations

import time
from collections.abc import Callable

from bot.config import SandboxSettings, StoreSettings
from bot.core.errors import DecodeError
from bot.run.repo_config import RepoConfig
from bot.run.setup_cache import RunCache, SetupCache
from bot.run.transcript import Transcript
from bot.sandbox import Sandbox, SandboxSpec, capabilities
from bot.workspace.clone import Workspace

MB = 1024 * 1024

Progress = Callable[[str], None]


def run_setup(sandbox: Sandbox, config: RepoConfig, transcript: Transcript, progress: Progress,
              redact: Callable[[str], str] = lambda text: text, *, deadline: float = float("inf")) -> None:
    """Run the repository's setup commands, with network; the first failure stops the run.

    The output is redacted whole before its tail is kept, so no secret is cut in two. Each command gets
    `setup_timeout`, clamped by what is left before `deadline` (the run's wall clock, `time.monotonic()`).
    """
    if config.setup:
        transcript.record("phase", name="setup")
    for command in config.setup:
        left = deadline - time.monotonic()
        if left < 1:
            raise DecodeError(f"setup command {command!r} from .github/decode.yml was not started: the run's "
                              f"time limit (DECODE_TIMEOUT_MINUTES) is used up")
        progress(f"setup: {command}")
        timeout = min(config.setup_timeout, left)
        result = sandbox.run(command, timeout=timeout)
        transcript.record("setup", command=command, exit_code=result.exit_code, output=redact(result.output)[-20_000:],
                          timed_out=result.timed_out, duration_s=result.duration_s)
        if result.timed_out or result.exit_code != 0:
            status = f"exited with {result.exit_code}"
            if result.timed_out:
                status = (f"timed out after setup_timeout={config.setup_timeout:g}s" if timeout >= config.setup_timeout
                          else "was stopped at the run's time limit (DECODE_TIMEOUT_MINUTES)")
            tail = result.output.strip().splitlines()[-5:]
            raise DecodeError(f"setup command {command!r} from .github/decode.yml {status}: " + " | ".join(tail))


def plan_setup_cache(sandbox: SandboxSettings, store: StoreSettings, spec: SandboxSpec, config: RepoConfig,
                     ws: Workspace, config_sha: str, repo: str, transcript: Transcript) -> RunCache | None:
    """The run's setup cache (bot/run/setup_cache.py), after pruning old entries; None without one. A run may fill
    the cache only when its workspace is the commit decode.yml and the key files were read from."""
    if not capabilities(sandbox.mode).setup_cache:
        return None
    cache = SetupCache(store.data_dir / "setup-cache")
    cap = sandbox.setup_cache_mb * MB
    cache.prune(store.keep_days, cap)
    run = RunCache.plan(cache, mode=sandbox.mode, spec=spec, repo=repo, setup=config.setup,
                        key_paths=config.setup_cache_key, git=ws.git, commit=config_sha,
                        may_save=ws.base_sha == config_sha, cap_bytes=cap)
    if run is not None and run.refused:
        transcript.record("setup_cache", result="refused", key=run.key[:12], reason=run.refused)
    return run
