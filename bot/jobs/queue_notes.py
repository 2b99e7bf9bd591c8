"""Keeps the tracking comment of every queued job saying where it stands (bot/jobs/queue.py).

Every runner (`decode serve`, `decode worker`) does this after its sweeps, at most every `every_s`.
A comment is written only when its line changes (the job moved up, or its reason changed), and only
by the one process whose `JobStore.note` changed the line in the store: several processes on one
store never write the same change twice, and a queue that does not move writes nothing. A failed
write is logged and never stops the runner: the next change writes the comment again, and the job's
own tracking comment replaces it when it starts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from bot.github.conclusion import marker
from bot.github.forge import Forge
from bot.github.queued import may_note, tell, wants_note
from bot.github.work import work_of
from bot.jobs.handler import tag_of
from bot.jobs.queue import Waiting, waiting
from bot.jobs.store import JobStore, StoreError

log = logging.getLogger(__name__)

EVERY_S = 5.0


class QueueNotes:
    """The queued comments of `store`'s jobs, told through `forge`."""

    def __init__(self, store: JobStore, forge: Forge, *, every_s: float = EVERY_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.store, self.forge = store, forge
        self.every_s, self.clock = every_s, clock
        self.told_at = float("-inf")
        self.comments: dict[int, int | None] = {}  # job id -> its comment (None: it gets none)

    def maybe_tell(self) -> None:
        """`tell`, unless it ran less than `every_s` ago."""
        if self.clock() - self.told_at >= self.every_s:
            self.tell()

    def tell(self) -> int:
        """Write the comment of every queued job whose line changed; returns how many were written."""
        self.told_at = self.clock()
        try:
            line = waiting(self.store)
        except StoreError as e:
            log.warning("could not read the queue to tell waiting jobs where they stand: %s", e)
            return 0
        written = sum(self._tell(w) for w in line if wants_note(work_of(w.job.payload)))
        queued = {w.job.id for w in line}
        self.comments = {job_id: c for job_id, c in self.comments.items() if job_id in queued}
        return written

    def _tell(self, w: Waiting) -> bool:
        job, work = w.job, work_of(w.job.payload)
        try:
            if job.id in self.comments and self.comments[job.id] is None:
                return False
            if not self.store.note(job.id, w.text):
                return False
            if job.id not in self.comments and not may_note(work, self.forge):
                self.comments[job.id] = None
                return False
            self.comments[job.id] = tell(self.forge, work, marker("run", tag_of(job)), w.text,
                                         self.comments.get(job.id))
            return True
        except Exception as e:  # noqa: BLE001 - a comment is a view of the queue; the runner goes on
            log.warning("job %d: could not say where it stands in the queue: %s", job.id, e,
                        extra={"job_id": job.id, "delivery_id": job.delivery_id})
            return False
