"""`decode run --plan`: the planning run of `/decode plan` from the command line. The model is offered the
read-only toolset (bot/github/modes.py), what its `bash` changes is thrown away, and nothing is delivered: no
branch in the repository, no pull request, no comment. The plan goes to stdout, the rest to stderr."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from bot.config import Settings
from bot.core.errors import ConfigError
from bot.core.names import CLI_ORIGIN, run_branch, run_tag
from bot.github.modes import PLAN
from bot.github.planning import no_answer, planning_task
from bot.run.pipeline import Job, execute
from bot.workspace.run_dirs import drop_clones


def run_plan(args: argparse.Namespace, settings: Settings, repo: str, token: str | None, task: str, run_id: str,
             progress: Callable[[str], None]) -> int:
    """Plan `task` on `repo` (a path or clone URL, with `token` when it needs one); print the plan. The exit status
    of the run: 0 when the plan is there."""
    job = Job(repo=repo, task=planning_task(task), branch=run_branch(run_tag(CLI_ORIGIN, run_id)), run_id=run_id,
              base=args.base, token=token, tools=PLAN.tools)
    ran = execute(job, settings.run, progress=progress)
    drop_clones(ran.run_dir)  # nothing to deliver
    figures = ran.result.figures
    if figures is not None:
        progress(f"figures: {figures.turns} turns, ${figures.cost_usd:.4f}, {figures.seconds:.1f}s")
    progress(f"transcript: {ran.transcript_md}")
    if ran.result.state != "success":
        agent = ran.agent
        why = no_answer(agent) or (agent.summary.splitlines()[0] if agent.summary else agent.stop_reason)
        print(f"decode: no plan: {why}", file=sys.stderr)
        return ran.result.exit_code or 1
    print(ran.agent.summary.strip())
    return 0


def issue_task(settings: Settings, repo: str, number: int, instructions: str) -> str:
    """The task of `--plan --issue N`: the issue's title and body as GitHub has them, fenced like any issue text."""
    from bot.github.auth import credentials_from
    from bot.github.forge import GitHubForge
    from bot.github.task_text import build_task
    from bot.github.work import Issue

    issue = GitHubForge(credentials_from(settings.github)).issue(repo, number)
    if issue.is_pull:
        raise ConfigError(f"--plan --issue {number}: #{number} is a pull request; plan an issue")
    work = Issue(repo=repo, number=number, sender_login="", instructions=instructions)
    return build_task(work, issue_title=issue.title, issue_body=issue.body)
