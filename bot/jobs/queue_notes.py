"""Keeps the tracking comment of every queued job saying where it stands (bot/jobs/queue.py).

Every process that runs jobs (`decode serve`, `decode worker`, Modal's `web` containers) does this on a
thread of its own (`start`), every `every_s`: never in the lease runner's sweep, whose heartbeats must
not wait for GitHub. A comment is written only when its line changes (the job moved up, or its reason
changed), and only by the one process whose `JobStore.note` changed the line in the store: several
processes on one store never write the same change twice, and a queue that does not move writes
nothing. Past the first ten places the line moves by tens (`bot.jobs.queue.place`), and one pass writes
at most `MAX_WRITES` comments, front of the queue first, the rest at the next passes: GitHub limits
content-creating requests per installation (80 a minute, 500 an hour:
https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits),
and a long queue must not spend them. A failed write is logged and never stops the thread: the next
change writes the comment again, and the job's own tracking comment replaces it when it starts.

A pass can write in the moment its job is claimed. An edit then may leave the queued line there until the
run's next phase edits it, within seconds; it is tried once, never retried, since a retry could land after
the run's result. A post leaves no second comment: of two with one mark the older is kept (`post_marked`).
"""

from __future__ import annotations

import logging
import threading

from bot.github.check_run import start_check_run
from bot.github.conclusion import marker
from bot.github.forge import Forge
from bot.github.queued import may_note, tell, wants_note
from bot.github.work import work_of
from bot.jobs.handler import tag_of
from bot.jobs.queue import Waiting, waiting
from bot.jobs.store import JobStore, StoreError

log = logging.getLogger(__name__)

EVERY_S = 5.0
MAX_WRITES = 20  # comments written by one pass


class QueueNotes:
    """The queued comments of `store`'s jobs, told through `forge`."""

    def __init__(self, store: JobStore, forge: Forge, *, every_s: float = EVERY_S) -> None:
        self.store, self.forge, self.every_s = store, forge, every_s
        self.comments: dict[int, int | None] = {}  # job id -> its comment (None: it gets none)

        self._stop = threading.Event()

    def start(self) -> None:
        """`tell` every `every_s` on a daemon thread, until `stop`."""
        threading.Thread(target=self._loop, name="queue-notes", daemon=True).start()

    def stop(self) -> None:
        """End the thread after its current pass."""
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.tell()
            except Exception:
                log.exception("telling queued jobs where they stand failed; trying again")

    def tell(self) -> int:
        """Write the comment of queued jobs whose line changed, front first, at most `MAX_WRITES`; returns how
        many were written."""
        try:
            line = waiting(self.store)
        except StoreError as e:
            log.warning("could not read the queue to tell waiting jobs where they stand: %s", e)
            return 0
        written = 0
        for w in line:
            if written < MAX_WRITES and wants_note(work_of(w.job.payload)):
                written += self._tell(w)
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
            start_check_run(self.forge, work, tag_of(job), None, summary=w.text)  # the job's run takes it over
            return True
        except Exception as e:  # noqa: BLE001 - a comment is a view of the queue; the runner goes on
            log.warning("job %d: could not say where it stands in the queue: %s", job.id, e,
                        extra={"job_id": job.id, "delivery_id": job.delivery_id})
            return False
