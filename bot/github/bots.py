"""Bots that may start work: `allowed_bots` in `.github/decode.yml` on the default branch.

A label added or a command written by a bot account (a triage workflow as `github-actions[bot]`, a
scheduler App) starts a run only when the repository's default branch lists that login under
`allowed_bots`; the list is read from the default branch, never from a pull request's head, so nobody
can allow a bot from a branch. This app's own account is never allowed, listed or not, so its own
comments and labels can never set it off again. Any other bot is ignored without a word: answering a bot
would only feed a loop of bots.

Even an allowed bot can be made to loop: a CI workflow that runs the agent's scripts on decode-bot's own pull
request can post the command as `github-actions[bot]`. So a bot's command on a pull request from a `decode/`
branch is ignored, and the runs bots start on one issue or pull request are capped (`DECODE_MAX_BOT_RUNS`):
each such run's tracking comment carries `BOT_RUN`, and GitHub's own comments are the count, so the cap holds
for the App, the Action and the CLI alike. Reaching it is said once, in one reply.
"""

from __future__ import annotations

import re

from bot.github.work import Work

BOT_RUN = "<!-- decode-bot:bot-run -->"  # in the tracking comment of every run a bot started
_RUN_LINK = r"https://[A-Za-z0-9.\-:]+/{repo}/actions/runs/[0-9]{{1,20}}"


def is_bot(login: str, sender_type: str) -> bool:
    """Whether the sender is a bot account: GitHub says so (`Bot`), or the login is an App's (`name[bot]`)."""
    return sender_type == "Bot" or login.lower().endswith("[bot]")


def bot_allowed(login: str, allowed: tuple[str, ...], self_login: str | None) -> bool:
    """Whether bot `login` may start work: listed in `allowed` (lower-cased logins) and not this app itself
    (`self_login`, the account whose token the bot acts with)."""
    me = (self_login or "").lower()
    return login.lower() in allowed and login.lower() != me


def cap_text(login: str, runs: int, cap: int, command: str) -> str:
    """The one reply when the bots' runs on an issue or pull request reach `cap` (`DECODE_MAX_BOT_RUNS`)."""
    plural = "s" if runs != 1 else ""
    return (f"🤖 Bots have started {runs} run{plural} here, the most `DECODE_MAX_BOT_RUNS` ({cap}) allows "
            f"on one issue or pull request, so decode-bot ignores `{login}` and every other bot here from "
            f"now on. A writer's `{command}` still starts a run.")


def acted_by(work: Work) -> str:
    """Who started `work`, for the tracking comment when it is an allowed bot: its login, and the workflow run
    of this repository that its command links to, when it links to one (a label carries no link)."""
    text = str(getattr(work, "instructions", "") or "")
    found = re.search(_RUN_LINK.format(repo=re.escape(work.repo)), text, flags=re.IGNORECASE)
    run = f" in [its workflow run]({found.group(0)})" if found else ""
    return (f"🤖 Started by `{work.sender_login}`{run}, which `allowed_bots` in `.github/decode.yml` lists."
            f"{BOT_RUN}")
