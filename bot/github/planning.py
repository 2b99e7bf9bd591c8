"""`/decode plan` and `/decode go`: the planning run's task, its plan comment, and the task that carries it out.

A planning run is the same loop with the read-only toolset (bot/github/modes.py): it changes nothing, pushes
nothing, and its answer becomes the issue's plan comment (`PLAN_MARKER`), edited in place by the next
`/decode plan` so GitHub keeps the earlier versions in the comment's edit history. `/decode go` reads that
comment as it is when its job starts: a writer may have edited it (only people with write access can edit
another account's comment on GitHub), and the edit counts. Its text is fenced as untrusted, like issue text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bot.agent.loop import AgentResult
from bot.agent.prompt import fence_untrusted
from bot.core.text import clean
from bot.github.conclusion import Conclusion
from bot.github.forge import Forge
from bot.github.hosts import allow_offer
from bot.run.markdown import safe_prose
from bot.run.pipeline import Ran
from bot.run.transcript import render_figures

PLAN_MARKER = "<!-- decode-bot:plan -->"
FOOTER = "<!-- decode-bot:plan-footer -->"  # what follows is ours (how to approve, figures), not the plan
PLAN_CHARS = 30_000  # of a plan given to `/decode go`'s run


@dataclass(frozen=True)
class PlanText:
    """The issue's plan comment as it reads now: its `text` (the plan, without our footer) and its `url`."""

    text: str
    url: str


def planning_task(task: str) -> str:
    """`task` (the issue and the instructions, fenced) framed as a planning run: read, then answer with a plan."""
    return ("This is a planning run: you are offered no tool that writes files, and what `bash` changes in the "
            "workspace is thrown away. Do not try to make the change. Read the code, run what helps you "
            "understand it, then answer with a plan in Markdown under these headings:\n"
            "## What I found\n(the files and the cause, with paths)\n"
            "## Steps\n(numbered: what you will change, where)\n"
            "## What I will not touch\n"
            "## Open questions\n(for the maintainers; 'None' when there are none)\n\n" + task)


def go_task(task: str, plan: PlanText) -> str:
    """The task of `/decode go`: `task` (the issue and the instructions) and the approved plan, fenced."""
    text = clean(plan.text)[:PLAN_CHARS] or "(empty)"
    return (task + "\nThe maintainers approved this plan (the issue's plan comment, as it reads now; they may have "
            "edited it). Carry it out, and say in your answer where you departed from it and why:\n"
            + fence_untrusted(text, "approved plan") + "\n")


def plan_of(body: str) -> str:
    """The plan in the plan comment `body`: without the marker and without our footer (when still there)."""
    return body.split(FOOTER, 1)[0].replace(PLAN_MARKER, "").strip()


def no_answer(agent: AgentResult) -> str | None:
    """Why a planning run has no plan though its agent completed: it said nothing last. None otherwise."""
    return "the agent finished without an answer" if agent.completed and not agent.answered else None


def read_plan(forge: Forge, repo: str, number: int) -> PlanText | None:
    """The plan comment on issue `number`, as it reads now; None when there is none."""
    found = forge.comment_text(repo, number, PLAN_MARKER)
    return PlanText(plan_of(found[1]), found[2]) if found is not None else None


def publish_plan(forge: Forge, repo: str, number: int, ran: Ran, redact: Callable[[str], str], *, command: str,
                 transcript_url: str | None) -> Conclusion:
    """Post the run's answer as the plan comment on issue `number` (or edit the one there); the conclusion for the
    tracking comment links it. A run that failed or stopped early posts no plan."""
    agent = ran.agent
    assert ran.result.figures is not None, "a finished run's result carries its figures"
    figs = render_figures(ran.result.figures, agent.stop_reason)
    answer = safe_prose(redact(agent.summary)).strip()
    if ran.result.state != "success":  # decided where the run ended (`state_of`): it stopped before answering
        if (why := no_answer(agent)) is not None:
            answer = ""
        else:
            why = redact(agent.error or agent.stop_reason)
        return Conclusion.of_run(ran, f"❌ decode-bot could not make a plan ({why}).\n\n{answer}\n\n{figs}".rstrip())
    link = f" · 📜 [Transcript]({transcript_url})" if transcript_url else ""
    offer = allow_offer(ran.result.blocked, command)
    link += f"\n\n{offer}" if offer else ""
    body = (f"📋 **decode-bot's plan**\n\n{answer}\n\n{FOOTER}\n---\n"
            f"To carry it out, comment `{command} go` (instructions may follow). A writer may edit this comment "
            f"first: `{command} go` works from the text as it is then. For another plan, comment "
            f"`{command} plan` with what to change; it replaces this one.\n\n{figs}{link}\n\n{PLAN_MARKER}")
    existing = forge.find_comment(repo, number, PLAN_MARKER)
    if existing is None:
        forge.post_comment(repo, number, body, PLAN_MARKER)
    else:
        forge.edit_comment(repo, existing, body)
    found = forge.comment_text(repo, number, PLAN_MARKER)
    where = f"[the plan comment]({found[2]})" if found is not None else "the plan comment"
    verb = "Posted" if existing is None else "Updated"
    return Conclusion.of_run(ran, f"📋 {verb} {where}. Nothing was changed or pushed; `{command} go` carries it out."
                                  f"\n\n{figs}")
