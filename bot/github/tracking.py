"""The live tracking comment: one comment per run, edited as the run moves, then to its result.

`Tracker.on_event` watches the run's transcript events (already redacted): a
`phase` event moves the checklist (preparing, sandbox, setup, agent, verifying,
publishing), a model response counts a turn and its cost, a tool call (or a
long answer's progress while it streams, `thinking… 1,204 tokens`) is the last
action; a sandbox that died and was replaced is counted and said at once. A phase change edits the comment at once; anything else at most once
per `interval_s` (10 s), and only as an optional write: one the forge's pacer lets through only while the
account has room (bot/github/pacing.py), so however many runs go at once their progress edits stay within
GitHub's secondary limits on content-creating requests
(https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits)
and never take the budget their results need. A phase change or the result always goes (waiting if it must).
A failed edit is logged and never fails the run: the comment is a view of the
run, and the next edit (or the final one) brings it up to date.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from bot.github.forge import Forge
from bot.run.markdown import safe_prose

log = logging.getLogger(__name__)

PHASES = {
    "preparing": "Preparing the workspace",
    "sandbox": "Starting the sandbox",
    "setup": "Running setup",
    "agent": "Agent at work",
    "verifying": "Verifying",
    "publishing": "Publishing",
}
INTERVAL_S = 10.0


class Tracker:
    """The tracking comment on `repo`, kept up to date; `footer` ends every version (links, the tag that finds
    it again). `comment_id` is the comment a retried job posted before, None for a new run."""

    def __init__(self, forge: Forge, repo: str, comment_id: int | None, *, footer: str, heading: str = "",
                 interval_s: float = INTERVAL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.forge, self.repo, self.comment_id = forge, repo, comment_id
        self.footer, self.heading = footer, heading
        self.interval_s, self.clock = interval_s, clock
        self.phase = "preparing"
        self.seen: list[str] = ["preparing"]
        self.turn = 0
        self.cost_usd = 0.0
        self.action = ""
        self.warnings: list[str] = []  # MCP servers the run goes on without, each said once
        self.restarts = 0  # sandboxes that died and were replaced (bot/run/restart.py)
        self.started = clock()
        self.edited_at = float("-inf")
        self.edits = 0
        self.last_text = ""
        self.attempts: dict[int, tuple[str, int, float]] = {}  # attempt -> (phase, turn, cost), of several
        self._lock = threading.Lock()

    def start(self, number: int, tag: str) -> None:
        """Post the comment on issue or pull request `number` (or edit the one found): unlike later edits, a
        failure here raises, since it says the token cannot write to the issue. A comment found but gone when
        edited (a racing queue note took its post back, or someone deleted it) is posted anew."""
        text = self.text()
        if self.comment_id is not None:
            try:
                self.forge.edit_comment(self.repo, self.comment_id, text)
            except Exception as e:  # noqa: BLE001 - posting says whether the token can write at all
                log.warning("could not edit comment %s on %s (%s); posting a new one", self.comment_id, self.repo, e)
                self.comment_id = None
        if self.comment_id is None:
            self.comment_id = post_marked(self.forge, self.repo, number, text, tag, over_older=True)
        self.last_text, self.edited_at, self.edits = text, self.clock(), 1

    def text(self) -> str:
        """The comment as it stands: the checklist, the agent's progress, the footer."""
        lines = [self.heading or "👀 decode-bot is working on this.", ""]
        for name, label in PHASES.items():
            if name == self.phase:
                lines.append(f"- ⏳ **{label}**{self._detail(name)}")
            elif name in self.seen:
                lines.append(f"- ✅ {label}")
            elif name not in ("setup", "verifying"):  # shown only when the run has them
                lines.append(f"- ⬜ {label}")
        lines += [f"  - attempt {n}: {PHASES.get(phase, phase)}" + (f", turn {turn}, ${cost:.4f}" if turn else "")
                  for n, (phase, turn, cost) in sorted(self.attempts.items())]
        if self.warnings:
            lines += ["", *self.warnings]
        return "\n".join(lines) + f"\n\n{self.footer}"

    def on_event(self, event: dict[str, Any]) -> None:
        """Take one transcript event; edit the comment on a phase change, else when the interval has passed."""
        try:
            kind = event.get("type")
            if kind == "phase" and event.get("name") in PHASES:
                self.move(str(event["name"]))
                return
            if kind == "model_response":
                self.turn = int(event.get("turn") or self.turn)
                self.cost_usd += float(event.get("cost_usd") or 0)
            elif kind == "tool_call":
                self.action = _action(event)
            elif kind == "model_progress":  # a long answer streaming: it is alive
                self.action = f"{event.get('phase', 'writing')}… {int(event.get('tokens') or 0):,} tokens"
            elif kind == "mcp_server" and event.get("state") == "down":
                reason = safe_prose(" ".join(str(event.get("reason")).split())[:300])
                self.warnings.append(f"⚠️ MCP server `{str(event.get('name')).replace('`', '')}` {reason}; the run "
                                     "goes on without it")
            elif kind == "sandbox_restart":
                self.restarts += 1
                self.action = f"the sandbox died ({event.get('reason')}); a new one carries on"
            else:
                return
            self._edit(force=kind in ("sandbox_restart", "mcp_server"))
        except Exception as e:  # noqa: BLE001 - the comment is a view; the run goes on whatever it does
            log.warning("tracking comment: %s", e)

    def on_attempt(self, number: int, event: dict[str, Any]) -> None:
        """Take one event of attempt `number` of several: its phase, turn and cost on its own line under the
        checklist (which follows the furthest attempt); from any attempt's thread."""
        with self._lock:
            kind, name = event.get("type"), str(event.get("name"))
            phase, turn, cost = self.attempts.get(number, ("preparing", 0, 0.0))
            if kind == "phase" and name in PHASES:
                phase = name
            elif kind == "model_response":
                turn, cost = int(event.get("turn") or turn), cost + float(event.get("cost_usd") or 0)
            elif kind == "run_end":
                phase = f"done: {event.get('stop_reason')}"
            elif kind == "attempt":  # how one that did not finish ended (bot/run/attempts.py), in words
                phase = str(event.get("state"))
            self.attempts[number] = (phase, turn, cost)
            if kind == "phase" and name in PHASES and list(PHASES).index(name) > list(PHASES).index(self.phase):
                self.move(name)
            else:
                self._edit(force=kind in ("phase", "run_end", "attempt"))

    def move(self, phase: str) -> None:
        """Enter `phase` and edit the comment now."""
        self.phase = phase
        if phase not in self.seen:
            self.seen.append(phase)
        self._edit(force=True)

    def finish(self, text: str) -> None:
        """The final version of the comment: the result (and the MCP servers the run went on without)."""
        warned = "\n\n" + "\n".join(self.warnings) if self.warnings else ""
        self._write(f"{text}{warned}\n\n{self.footer}")

    def _detail(self, phase: str) -> str:
        if phase != "agent" or not self.turn:
            return ""
        elapsed = int(self.clock() - self.started)
        parts = [f"turn {self.turn}", f"${self.cost_usd:.2f}", f"{elapsed // 60}m {elapsed % 60:02d}s"]
        if self.restarts:
            parts.append(f"sandbox restarted {self.restarts}x")
        if self.action:
            parts.insert(1, f"last: {self.action}")
        return ": " + " · ".join(parts)

    def _edit(self, *, force: bool) -> None:
        if not force and self.clock() - self.edited_at < self.interval_s:
            return
        self._write(self.text(), optional=not force)

    def _write(self, text: str, *, optional: bool = False) -> None:
        if text == self.last_text or self.comment_id is None:
            return
        self.edited_at = self.clock()
        try:
            if not self.forge.edit_comment(self.repo, self.comment_id, text, optional=optional):
                return  # no room now: the next edit brings it up to date
        except Exception as e:  # noqa: BLE001 - a failed edit never fails the run
            log.warning("could not edit the tracking comment %s on %s: %s", self.comment_id, self.repo, e)
            return
        self.last_text = text
        self.edits += 1


def post_marked(forge: Forge, repo: str, number: int, text: str, tag: str, *, over_older: bool) -> int:
    """Post `text` (marked `tag`) on issue or pull request `number`; its comment's id. Two writers of one mark can
    race: a job's queue note (bot/jobs/queue_notes.py) is posted in the moment the job starts and its tracker,
    which found no comment, posts its own. The oldest of ours with `tag` is the one kept: when it is not this one,
    this one is deleted and that one returned, given `text` when `over_older`."""
    posted = forge.post_comment(repo, number, text, tag)
    oldest = forge.find_comments(repo, number, tag)[:1]
    if not oldest or oldest[0] == posted:
        return posted
    forge.delete_comment(repo, posted)
    if over_older:
        forge.edit_comment(repo, oldest[0], text)
    return oldest[0]


def _action(event: dict[str, Any]) -> str:
    """A tool call in a few words, as Markdown code: `bash: pytest -q`, `edit: src/app.py`."""
    args = event.get("input") or {}
    detail = str(args.get("command") or args.get("path") or args.get("pattern") or "")
    detail = " ".join(detail.split())[:60]
    text = f"{event.get('name', 'tool')}: {detail}" if detail else str(event.get("name", "tool"))
    return "`" + text.replace("`", "'") + "`"
