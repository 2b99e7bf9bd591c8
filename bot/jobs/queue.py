"""Where each queued job stands, and why it waits: what its tracking comment and the dashboard say.

`line_up` is pure: from a store's `Snapshot` and its `Caps` it puts the queued jobs in the order claims
take them (bot/jobs/store.py's docstring) if no job came or ended meanwhile: the installation whose last
claim is the oldest goes first, then round by round each installation's next oldest job, so with two
installations their jobs alternate. A job's reason is the first that holds: a run on the same issue or pull
request is going, its repository is at its cap, its installation is at its cap, else it waits for a free
worker. The position is the job's place in that order, whatever its reason: a job behind one held by a cap
may start first, and the position of both then moves. A comment says the first `EXACT` places as they
are and the rest by tens (`place`): a deep queue moves by one place at each claim, and its comments
then change once in ten claims, not at every one.

A page of the line (`page`, the dashboard's queue table) reads only the front of each installation's queue:
a job at place p is at most the p-th of its installation, so each installation's oldest `p` jobs give every
place up to p exactly (`Snapshot` with `upto`), whatever the queue and the store hold behind them.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from bot.core.names import key_parts
from bot.jobs.store import Caps, JobRecord, JobStore, Snapshot, repo_of

FREE_WORKER = "waiting for a free worker"
EXACT = 10


@dataclass(frozen=True)
class Waiting:
    """A queued job, its place in line (1: next) and why it waits."""

    job: JobRecord
    position: int
    reason: str

    @property
    def repo(self) -> str:
        """The job's repository, "owner/name"."""
        return repo_of(self.job.key)

    @property
    def text(self) -> str:
        """The one line a comment or a check run shows: `3rd in line; waiting for a free worker`."""
        return f"{place(self.position)}; {self.reason}"


def waiting(store: JobStore) -> list[Waiting]:
    """The queued jobs of `store` in the order they would be claimed, each with its position and reason:
    the one function the tracking comment, the dashboard and a check run read."""
    return line_up(store.snapshot(), store.caps)


def standing(store: JobStore, job_id: int) -> Waiting | None:
    """Where the job `job_id` stands in `store`'s queue and why it waits (`Waiting.text` is the line to show),
    None when it is not queued: for a view of one job, such as its check run."""
    return next((w for w in waiting(store) if w.job.id == job_id), None)


def page(store: JobStore, after: int, count: int, keep: Callable[[Waiting], bool]) -> tuple[list[Waiting], bool]:
    """The first `count` jobs that `keep` accepts at places after `after`, in claim order, and whether the line
    goes on past the last of them: read from the front `after + window` places, the window doubling while
    the page is not full and the line goes on (`keep` accepts few of it), so a page costs about its places."""
    window = count
    while True:
        upto = after + window
        line = line_up(store.snapshot(upto=upto + 1), store.caps)  # exact up to place upto + 1
        found = [w for w in line[after:upto] if keep(w)][:count]
        if len(found) == count or len(line) <= upto:
            last = found[-1].position if len(found) == count else upto
            return found, len(line) > last
        window *= 2


def line_up(snapshot: Snapshot, caps: Caps) -> list[Waiting]:
    """The queued jobs of `snapshot` in claim order (this module's docstring), each with why it waits."""
    by_installation: dict[str, list[JobRecord]] = defaultdict(list)
    for job in snapshot.queued:
        by_installation[job.installation].append(job)
    turn = sorted(by_installation, key=lambda name: (snapshot.last_claimed.get(name, float("-inf")),
                                                     by_installation[name][0].id))
    order = sorted(((rank, turn.index(name), job) for name, jobs in by_installation.items()
                    for rank, job in enumerate(jobs)), key=lambda t: (t[0], t[1]))
    keys = {key for key, _ in snapshot.running}
    repos = Counter(repo_of(key) for key, _ in snapshot.running)
    installations = Counter(installation for _, installation in snapshot.running)
    return [Waiting(job, position, _reason(job, keys, repos, installations, caps))
            for position, (_, _, job) in enumerate(order, start=1)]


def _reason(job: JobRecord, keys: set[str], repos: Counter[str], installations: Counter[str], caps: Caps) -> str:
    repo = repo_of(job.key)
    if job.key in keys:
        _, number = key_parts(job.key)
        return f"waiting: another run on {repo}{f'#{number}' if number is not None else ''} is going"
    if caps.per_repo and repos[repo] >= caps.per_repo:
        return f"waiting: {repo} already has {_runs(repos[repo])} going (the cap is {caps.per_repo})"
    if caps.per_installation and installations[job.installation] >= caps.per_installation:
        return (f"waiting: its installation already has {_runs(installations[job.installation])} going "
                f"(the cap is {caps.per_installation})")
    return FREE_WORKER


def _runs(n: int) -> str:
    return f"{n} run" if n == 1 else f"{n} runs"


def place(position: int) -> str:
    """`3rd in line` for the first `EXACT` places, then by tens: `in line behind 40+ jobs` (47th)."""
    if position <= EXACT:
        return f"{ordinal(position)} in line"
    return f"in line behind {(position - 1) // EXACT * EXACT}+ jobs"


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, 11th, 12th, 13th, 21st..."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
