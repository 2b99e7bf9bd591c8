"""The repository's `setup:` commands (.github/decode.yml), run in a fresh sandbox before the agent: by the
pipeline (again in each sandbox that replaces a dead one, bot/run/restart.py) and by `decode eval`."""

from __future__ import annotations

import time
from collections.abc import Callable

from bot.core.errors import DecodeError
from bot.run.repo_config import RepoConfig
from bot.run.transcript import Transcript
from bot.sandbox import Sandbox

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
