"""What the harness itself tells people next to the agent's summary: files it left out of the
commit, connections it blocked, sandbox restarts, and a change handed back as a patch when it could not be
pushed.

Paths and host names come from the sandbox, so they are untrusted: each is shown in a code span
that it cannot close, and nothing in them can mention anyone or link anywhere.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from bot.github.body import split_markdown
from bot.run.markdown import home_of, safe_prose
from bot.workspace.patch_check import WORKFLOW_REASON

if TYPE_CHECKING:
    from bot.run.pipeline import Ran

_HOST = re.compile(r"[^A-Za-z0-9.\-_:\[\]*]")


def code(text: str) -> str:
    """`text` as an inline code span that no backtick inside it can close."""
    text = " ".join(text.split())
    ticks = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def agent_summary(ran: Ran, redact: Callable[[str], str]) -> str:
    """The agent's summary as GitHub shows it: redacted, then `safe_prose` keeping links to the run's own
    repository only."""
    return safe_prose(redact(ran.agent.summary), home_of(ran.job.repo))


def restarts_note(restarts: Sequence[str]) -> str:
    """Markdown saying the sandbox died and the run went on in a new one, each time with why ("" when it never
    did); the reasons are the harness's own words (`Launcher.death`)."""
    if not restarts:
        return ""
    times = "once" if len(restarts) == 1 else f"{len(restarts)} times"
    why = "\n".join(f"- {safe_prose(reason[:300], inline=True)}" for reason in restarts)
    return (f"**Sandbox:** the sandbox died {times} during the run, and a new one carried on with the kept "
            f"workspace (`DECODE_MAX_RESTARTS` bounds how often):\n{why}")


def harness_notes(*, left_out: Mapping[str, str], blocked: dict[str, int], restarts: Sequence[str] = ()) -> str:
    """Markdown for the PR body and replies: what was left out of the commit and why, connections blocked,
    sandbox restarts."""
    parts = [restarts_note(restarts)] if restarts else []
    workflows = [p for p, why in left_out.items() if why == WORKFLOW_REASON]
    others = sorted((p, why) for p, why in left_out.items() if why != WORKFLOW_REASON)
    if workflows:
        files = "\n".join(f"- {code(p)}" for p in workflows[:50])
        more = f"\n- and {len(workflows) - 50} more" if len(workflows) > 50 else ""
        parts.append("**Left out of the commit:** changes to workflow files, which would run with this "
                     f"repository's secrets:\n{files}{more}\n\nTo let decode-bot commit them, set "
                     "`allow_workflow_changes: true` in `.github/decode.yml` on the base branch.")
    if others:
        rows = "\n".join(f"- {code(p[:300])}: {code(why[:300])}" for p, why in others[:50])
        more = f"\n- and {len(others) - 50} more" if len(others) > 50 else ""
        parts.append("**Left out of the commit:** entries decode-bot does not carry out of the sandbox; "
                     f"the rest of the change is committed without them:\n{rows}{more}")
    if blocked:
        counted = sorted(blocked.items(), key=lambda kv: (-kv[1], kv[0]))
        lines = "\n".join(f"- blocked: {code(_HOST.sub('', dest)[:120])} x{count}" for dest, count in counted[:30])
        more = f"\n- and {len(counted) - 30} more destinations" if len(counted) > 30 else ""
        parts.append("**Network:** the egress policy blocked these connections of the agent:\n"
                     f"{lines}{more}\n\nTo allow them, list the names under `allow_domains:` (or set "
                     "`network: true`) in `.github/decode.yml` on the base branch.")
    return "\n\n".join(parts)


def files_changed(numstat: bytes) -> str:
    """The files a commit changed with lines added and removed, from `git diff --numstat -z --no-renames`
    (binary files count no lines); at most 50 named."""
    rows = []
    for entry in numstat.decode("utf-8", "replace").split("\0"):
        added, _, rest = entry.partition("\t")
        deleted, _, path = rest.partition("\t")
        if path:
            rows.append((path, added, deleted))
    if not rows:
        return ""
    total_add = sum(int(a) for _, a, _ in rows if a.isdigit())
    total_del = sum(int(d) for _, _, d in rows if d.isdigit())
    lines = [f"- {code(path[:300])} " + ("(binary)" if not a.isdigit() else f"+{a} −{d}")
             for path, a, d in rows[:50]]
    if len(rows) > 50:
        lines.append(f"- and {len(rows) - 50} more")
    noun = "file" if len(rows) == 1 else "files"
    return f"**Files changed** ({len(rows)} {noun}, +{total_add} −{total_del}):\n" + "\n".join(lines)


def patch_parts(patch: str, *, started_from: str, limit: int) -> list[str]:
    """The change as `git am`-able patch text in `<details>` blocks of at most `limit` characters."""
    fence = "`" * max(3, max((len(run) for run in re.findall(r"`+", patch)), default=0) + 1)
    text = f"{fence}diff\n{patch.rstrip()}\n{fence}\n"
    chunks = split_markdown(text, limit - 600)
    how = (f"Made on {code(started_from[:12])}. To apply it: save the text inside the block as "
           "`decode.patch`, then run `git am decode.patch` on the pull request's branch"
           + (" (join the parts in order first)" if len(chunks) > 1 else "") + ".")
    label = "The change as a patch" if len(chunks) == 1 else "The change as a patch (part {i} of {n})"
    return [f"<details><summary>{label.format(i=i, n=len(chunks))}</summary>\n\n{how}\n\n{chunk}\n</details>\n"
            for i, chunk in enumerate(chunks, 1)]
