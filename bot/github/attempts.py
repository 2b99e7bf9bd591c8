"""Attempts on GitHub: how many a run gets (decode.yml's `attempts`, read through the API from the branch
whose decode.yml applies), their progress on the tracking comment, and their list for the pull request body.
The attempts themselves are bot/run/attempts.py's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import PurePath
from typing import Any

from bot.config import RunParts, WebSettings
from bot.core.errors import DecodeError
from bot.github.check_run import CheckRun
from bot.github.forge import Forge
from bot.github.links import run_link
from bot.github.tracking import Tracker
from bot.run.attempts import Attempt, pick, run_attempts, stand_in, table, why
from bot.run.pipeline import Job, Ran
from bot.run.repo_config import PATH, config_of, parse_attempts


def attempts_of(asked: int | str | None, forge: Forge, repo: str, ref: str) -> int:
    """How many attempts a run gets: `asked` (`decode run --attempts N`, `/decode attempts=N`) when given, else
    decode.yml's `attempts` on `ref` (1 without the file or the key); a `ConfigError` for a bad count."""
    if asked is not None:
        return parse_attempts(int(asked) if str(asked).isdigit() else asked, f"attempts={asked}: the count")
    return config_of(forge.file_at(repo, PATH, ref), f" on {ref}").attempts


def best_of(job: Job, parts: RunParts, web: WebSettings, count: int, progress: Callable[[str], None],
            tracking: Tracker | None, check: CheckRun, run_url: str | None = None) -> tuple[Ran, str]:
    """`count` attempts of `job`, each one's progress on the tracking comment; the run to publish and the
    attempts section of its body, each attempt's row linking its transcript page (with DECODE_PUBLIC_URL), else,
    on an Actions run (`run_url`), naming its directory in the run's artifact (`decode action`'s
    `transcript_path`) and linking the run. With
    none to pick (every attempt failed `verify` or changed nothing), the first that finished (one that started,
    if any did) is published, as a single run that did so would be; with none that finished, the first attempt's
    error is the run's."""
    def watch(number: int, event: dict[str, Any]) -> None:
        if tracking is not None:
            tracking.on_attempt(number, event)
        if event.get("type") == "phase":
            check.on_event(event)

    chosen, attempts, rans = run_attempts(job, count, progress, watch, parts=parts)
    published = stand_in(chosen, attempts, rans)
    if published is None:
        raise DecodeError(f"none of the {count} attempts finished: {attempts[0].error}")
    number = rans.index(published) + 1
    shown = [replace(a, transcript=where(a, run_link(web, parts.store, a.run_id), run_url)) for a in attempts]
    section = "\n".join([f"**Attempts** ({count}; published: attempt {number}): {why(attempts, pick(attempts))}", "",
                         *table(shown, pick(attempts) or attempts[number - 1])])
    return published, section


def where(attempt: Attempt, page: str | None, run_url: str | None) -> str:
    """An attempt's transcript in the pull request body: its page, else its directory in the Actions run's
    artifact, else (a `decode run` on this machine) its path."""
    if page:
        return f"[transcript]({page})"
    if run_url and attempt.transcript:
        return f"[`{PurePath(attempt.transcript).parent.name}/transcript.md`]({run_url}) in the run's artifact"
    return attempt.transcript
