"""`/decode continue`: carry a decode-bot pull request on from its last run, when that run stopped early.

What a continuing run needs is kept where every door can read it again, in the pull request itself: each run
that writes a decode-bot pull request's description (the run that opens it, and each continuing run) leaves a
hidden `PullState` at its end (a run on its branch by another command only updates that state, `record_run`), `<!-- decode-bot:state:<base64 JSON> -->`. It holds every run on the branch so far
(its tag, how it stopped, its summary and figures), the task being carried on (the last run's own task: the
opener's, or a later command's), the last steps of the last run (from its transcript) and the issue the pull
request closes. A continuing run reads it back, works on the
same branch with a fresh budget, and rebuilds the description over all the runs.

Once per stop: the tracking comment of a continuing run carries `<!-- decode-bot:continues:<stopped run's tag> -->`,
and a second `/decode continue` on the same stop finds it and is answered, not run. The description is text that
people with write access can edit, so what is read back from it is fenced as data in the task.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from typing import Any

from bot.agent.loop import STOP_MESSAGES
from bot.agent.prompt import fence_untrusted
from bot.core.names import is_decode_branch, run_tag_parts
from bot.core.text import clean
from bot.github.conclusion import marker
from bot.github.forge import Forge
from bot.github.info import PullInfo
from bot.github.work import Continue
from bot.run.result import Figures
from bot.run.markdown import safe_prose

TASK_CHARS = 12_000  # of the task being carried on, kept for the runs that continue it
SUMMARY_CHARS = 4_000  # of each run's summary
STEPS = 8  # the last tool calls of the last run
STATE_CHARS = 30_000  # of the encoded state; the task and the last run's summary always fit (about 24,000)
_FIGURES = re.compile(r"(?:[0-9]{1,9} turns, \$[0-9]{1,9}\.[0-9]{2})?")
_STATE = re.compile(r"\n*<!-- decode-bot:state:([A-Za-z0-9+/=]*) -->\n*")


@dataclass(frozen=True)
class RunNote:
    """One run on the branch: its tag (`core.names.run_tag`), its stop reason (the agent loop's), its summary
    and its figures in a few words."""

    tag: str
    stop: str
    summary: str
    figures: str

    @property
    def stopped(self) -> bool:
        """Whether the run stopped before it finished: a budget cap, an interrupt, an error."""
        return self.stop != "completed"


@dataclass(frozen=True)
class PullState:
    """What a decode-bot pull request's description records of the runs on its branch, oldest first."""

    runs: tuple[RunNote, ...]
    task: str
    last_steps: tuple[str, ...] = ()
    closes: int | None = None

    @property
    def last(self) -> RunNote:
        return self.runs[-1]

    def block(self) -> str:
        """The hidden block that ends the description, at most about `STATE_CHARS` characters: past that, the
        oldest runs' summaries give way first (to "(cut)"), so a description of many runs still fits GitHub's
        cap and leaves room for the report."""
        runs = [vars(r) for r in self.runs]
        for i in range(len(runs) + 1):
            data = {"runs": runs, "task": self.task, "last_steps": list(self.last_steps), "closes": self.closes}
            encoded = base64.b64encode(json.dumps(data).encode()).decode()
            if len(encoded) <= STATE_CHARS or i == len(runs):
                return f"<!-- decode-bot:state:{encoded} -->"
            runs[i] = {**runs[i], "summary": "(cut)"}
        raise AssertionError("unreachable")


def read_state(body: str | None) -> PullState | None:
    """The state a description ends with, None when it holds none (or one that does not read)."""
    found = _STATE.findall(body or "")
    if not found:
        return None
    try:
        data = json.loads(base64.b64decode(found[-1], validate=True))
        runs = tuple(RunNote(str(r["tag"]), str(r["stop"]), str(r["summary"]), str(r["figures"]))
                     for r in data["runs"])
        if not all(run_tag_parts(r.tag) and r.stop in STOP_MESSAGES and _FIGURES.fullmatch(r.figures) for r in runs):
            return None  # edited by hand into something decode-bot never writes
        closes = data.get("closes")
        return PullState(runs, str(data["task"]), tuple(str(s) for s in data.get("last_steps") or ()),
                         closes if isinstance(closes, int) and not isinstance(closes, bool) else None) if runs else None
    except (binascii.Error, ValueError, KeyError, TypeError):
        return None


def with_state(body: str, state: PullState) -> str:
    """`body` ending with `state`'s block, instead of any block it had."""
    return _STATE.sub("\n", body).rstrip() + "\n\n" + state.block() + "\n"


def record_run(forge: Forge, repo: str, number: int, note: RunNote, task: str, steps: tuple[str, ...]) -> None:
    """After a run that pushed to pull request `number` by its own task (a `/decode` comment, a review, a CI
    fix): when the description keeps a state (a decode-bot pull request), the run is added to it and becomes
    the one `/decode continue` carries on, with its own task; the visible description is left as it is."""
    pull = forge.pull(repo, number)
    state = read_state(pull.body)
    if state is None:
        return
    state = PullState((*state.runs, note), task[:TASK_CHARS], steps, state.closes)
    forge.open_or_update_pull(repo, head=pull.head_ref, base=pull.base_ref, title=pull.title,
                              body=with_state(pull.body, state), draft=True)


def note_of(tag: str, stop: str, summary: str, figures: Figures | None) -> RunNote:
    """A run's note: its summary (already redacted and made safe for GitHub) cut to `SUMMARY_CHARS`."""
    said = summary if len(summary) <= SUMMARY_CHARS else summary[:SUMMARY_CHARS] + " …"
    figs = "" if figures is None else f"{figures.turns} turns, ${figures.cost_usd:.2f}"
    return RunNote(tag, stop, said, figs)


def last_steps(events: list[dict[str, Any]]) -> tuple[str, ...]:
    """The last `STEPS` tool calls of a transcript's events (already redacted), each in a line."""
    steps = []
    for event in events:
        if event.get("type") == "tool_call":
            raw = event.get("input")
            args = raw if isinstance(raw, dict) else {}
            detail = " ".join(str(args.get("command") or args.get("path") or args.get("pattern") or "").split())
            steps.append(f"{event.get('name', 'tool')}: {detail[:200]}".rstrip(": "))
    return tuple(steps[-STEPS:])


def resumable(work: Continue, pull: PullInfo | None, author: str, bot_login: str | None, state: PullState | None,
              continued: bool) -> PullState | str:
    """The state to continue from, or the reply that says why `/decode continue` starts nothing here;
    `author` opened the pull request, `continued` says a run already continues its last stop."""
    command = "`/decode continue`"
    if pull is None:
        return f"{command} carries on the last run of a pull request decode-bot opened: comment it there."
    ours = author.lower() == (bot_login or "").lower() and pull.same_repo(work.repo) and \
        is_decode_branch(pull.head_ref)
    if not ours:
        return f"{command} works on pull requests decode-bot opened, and #{pull.number} is not one of them."
    if state is None:
        return (f"decode-bot finds no record of its runs in this pull request's description, so {command} has "
                "nothing to carry on; comment `/decode <what to do>` to start a new run.")
    last = state.last
    if not last.stopped:
        return (f"The last run on this pull request finished (run `{last.tag}`), so there is nothing to continue; "
                "comment `/decode <what to do>` to ask for more.")
    if continued:
        return (f"The stop of run `{last.tag}` ({STOP_MESSAGES.get(last.stop, last.stop)}) is already being "
                f"continued by a later run (its comment is above); {command} carries on each stop once. When that "
                "run stops early too, comment it again.")
    return state


def continues_marker(state: PullState) -> str:
    """The marker of a continuing run's tracking comment: the stop it carries on, continued once."""
    return marker("continues", state.last.tag)


def continue_task(work: Continue, state: PullState) -> str:
    """The task of a continuing run: our framing, and what the description recorded, fenced as data."""
    last = state.last
    parts = [f"An earlier decode-bot run on pull request #{work.number} in {work.repo} "
             f"{STOP_MESSAGES.get(last.stop, 'stopped')} before it finished. This branch holds its work so far "
             "(its commits are on top of the base branch: read `git log` and `git diff` to see them). Carry the "
             "task on from where it stopped and finish it; you have a fresh budget.",
             "The task being carried on (as decode-bot wrote it for the run that was given it):\n"
             + fence_untrusted(clean(state.task) or "(empty)", "the earlier run's task")]
    for i, run in enumerate(state.runs, 1):
        parts.append(f"What run {i} of {len(state.runs)} said when it ended:\n"
                     + fence_untrusted(clean(run.summary) or "(nothing)", f"summary of run {i}"))
    if state.last_steps:
        parts.append("The last steps of the run that stopped, oldest first:\n"
                     + fence_untrusted("\n".join(state.last_steps), "the stopped run's last steps"))
    if work.instructions:
        parts.append(f"Instructions (from @{work.sender_login}):\n"
                     + fence_untrusted(clean(work.instructions), f"instructions from @{work.sender_login}"))
    return "\n\n".join(parts) + "\n"


def earlier_runs(state: PullState) -> str:
    """The description's section on the runs before the latest one; their summaries are read back from the
    description, which people can edit, so they are made safe for GitHub again."""
    rows = []
    for i, run in enumerate(state.runs, 1):
        how = STOP_MESSAGES.get(run.stop, run.stop)
        figures = f", {run.figures}" if run.figures else ""
        rows.append(f"<details><summary>Run {i} ({run.tag}): {how}{figures}</summary>\n\n"
                    f"{safe_prose(run.summary).strip()}\n\n</details>")
    return "**Earlier runs on this branch**, continued with `/decode continue`:\n\n" + "\n\n".join(rows)
