"""The kinds of run, as values: what the pure `plan()` (bot/github/plan.py) picks and the job and pipeline ask.

A `RunMode` says which tools the model is offered (a `Toolset`, bot/agent/tools.py) and whether an agent runs at
all; where the result goes is the plan's `Delivery`. Nothing downstream compares a mode's name: it asks the value
(claude-code-action's `Mode`, its plan mode one object that disallows Edit and Write).
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.agent.tools import DEFAULT_TOOLS, READ_ONLY_TOOLS, Toolset


@dataclass(frozen=True)
class RunMode:
    """A kind of run: `name` for logs and the transcript, the `tools` its model is offered, and whether an agent
    runs (`agent`: False for a run the harness makes on its own, like `/decode allow`'s pull request)."""

    name: str
    tools: Toolset
    agent: bool = True


IMPLEMENT = RunMode("implement", DEFAULT_TOOLS)  # an issue, a command, a dispatch: a commit, then a delivery
PLAN = RunMode("plan", READ_ONLY_TOOLS)  # `/decode plan`: read-only; its answer is the plan comment
GO = RunMode("go", DEFAULT_TOOLS)  # `/decode go`: the plan comment, as it reads now, is part of the task
REVIEW = RunMode("review", DEFAULT_TOOLS)  # a pull request review's comments, answered in their threads
ALLOW = RunMode("allow", READ_ONLY_TOOLS, agent=False)  # `/decode allow HOST ...`: decode.yml edited, no agent
