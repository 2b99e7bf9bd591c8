"""The tracking comment of a job that waits in the queue: its place in line and why it waits.

The comment carries the run's marker, so when the job starts, its tracking comment
(bot/github/tracking.py, posted by bot/github/job.py) finds this one and edits it into the
checklist: one comment per run, from queued to the result.

Only work someone asked for gets one, and only when the one who asked may start work (write access,
the check `run_github_job` repeats when the job runs): an outsider's command is refused by the job in
one reply, never told first that it is queued. Unasked work (a review requesting changes, a failed
check suite) may well be skipped by the job, so it waits quietly; a workflow run and a label job have
no issue to comment on.
"""

from __future__ import annotations

from bot.github.forge import Forge
from bot.github.tracking import post_marked
from bot.github.triggers import may_trigger
from bot.github.work import Comment, Issue, Review, ReviewComment, Work


def queued_text(line: str, footer: str) -> str:
    """The comment while the job waits: `line` (`3rd in line; waiting for a free worker`), then `footer`
    (the run's marker)."""
    return f"⏳ decode-bot queued this: {line}.\n\n{footer}"


def wants_note(work: Work) -> bool:
    """True for work someone asked for on an issue or a pull request (the sender is checked by `may_note`)."""
    match work:
        case Review():
            return work.by_command
        case Issue() | Comment() | ReviewComment():
            return work.sender_type != "Bot"
        case _:
            return False


def may_note(work: Work, forge: Forge) -> bool:
    """True when `work` gets a queued comment: asked for (`wants_note`) by someone with write access."""
    return wants_note(work) and may_trigger(forge.permission(work.repo, work.sender_login))


def tell(forge: Forge, work: Work, marker: str, line: str, comment_id: int | None) -> int:
    """Post the queued comment of `work` (marked `marker`), or edit it to `line` when it is `comment_id` or
    can be found by its marker; returns its id. An edit is optional (tried once, while the account's writes have
    room): retried after a failure, it could land after the job's run, claimed meanwhile, wrote over it."""
    assert work.number is not None, "only work on an issue or a pull request is told it waits"
    text = queued_text(line, marker)
    if comment_id is None:
        comment_id = forge.find_comment(work.repo, work.number, marker)
    if comment_id is None:  # an older one found after the post (the run's, or another process's note) is kept
        return post_marked(forge, work.repo, work.number, text, marker, over_older=False)
    forge.edit_comment(work.repo, comment_id, text, optional=True)
    return comment_id
