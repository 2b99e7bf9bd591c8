"""The text a run writes for others: the repository's facts for the task message and the one review turn
before the agent's answer (for the model), and the commit message (for git).

Split from bot/run/pipeline.py, whose steps call them: `repo_facts` reads the host's clean clone,
`review_hand_back` asks the sandbox, `commit_message` is pure.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable

from bot.agent.loop import AgentResult
from bot.agent.prompt import RepoFacts
from bot.core.errors import DecodeError
from bot.core.text import one_line
from bot.run.markdown import safe_commit_text
from bot.run.transcript import Transcript
from bot.sandbox import Sandbox
from bot.sandbox.protocol import CapReached
from bot.workspace.clone import Workspace


def review_hand_back(sandbox: Sandbox, base_sha: str, max_file: int, transcript: Transcript) -> str | None:
    """The one extra turn before the agent's answer is accepted: what the hand-back would leave out, named,
    with how to fix it; None when nothing would be (or the sandbox cannot tell)."""
    try:
        found = sandbox.check_hand_back(base_sha, max_file_bytes=max_file)
    except CapReached:  # the run stops at the cap (bot/agent/loop.py)
        raise
    except DecodeError as e:
        transcript.record("note", text=f"the hand-back could not be checked before the answer: {e}")
        return None
    if not found:
        return None
    entries = sorted(found.items())[:50]
    listed = "\n".join(f"- {path}: {why}" for path, why in entries)
    transcript.record("note", text="before the answer, the agent was told these entries would be left out: "
                                   + "; ".join(f"{path} ({why})" for path, why in entries))
    return ("Before your answer is accepted: these entries in the workspace would be left out of the commit, "
            f"and the rest committed without them:\n{listed}\n\nFix them if they are part of your change: make "
            "symlinks point to files inside the repository (or use a copy), keep files under the size limit, "
            "and leave .git and nested repositories alone; delete what is not needed. This is your only "
            "chance to change them. Then answer again with your summary.")


def repo_facts(ws: Workspace, branch: str) -> RepoFacts:
    """Facts for the task message, read from the host's clean clone and cleaned like user text (a fork's
    author chooses the file names, the commit subject and the branch name)."""
    names = []
    for record in filter(None, ws.git("ls-tree", "-z", ws.base_sha, what="listing the top level").split(b"\0")):
        meta, _, name = record.partition(b"\t")
        names.append(one_line(os.fsdecode(name)) + ("/" if meta.split(b" ")[1] in (b"tree", b"commit") else ""))
    entries = sorted(names)
    last = subprocess.run(
        ["git", "-c", "core.fsmonitor=false", "log", "-1", "--format=%h %s"],
        cwd=ws.clean, capture_output=True, text=True,
    ).stdout.strip()
    return RepoFacts(branch=one_line(branch), top_level="\n".join(f"  {e}" for e in entries[:200]),
                     last_commit=one_line(last))


def commit_message(heading: str, result: AgentResult, redact: Callable[[str], str] = lambda text: text) -> str:
    """First line from `heading` (the job's title, else its task), the summary (redacted, then capped) as the body; both made safe for
    a commit message (`safe_commit_text`): an issue's author or a steered model cannot close issues, ping
    people or add trailers such as Co-authored-by through it."""
    first = heading.strip().splitlines()[0] if heading.strip() else ""
    subject = safe_commit_text(one_line(first), subject=True).strip() or "changes"
    subject = subject if len(subject) <= 64 else subject[:61] + "..."
    prefix = "decode" if result.completed else \
        f"decode ({'failed' if result.failed else 'incomplete'}: {result.stop_reason})"
    body = safe_commit_text(redact(result.summary)).strip()[:4000]
    return f"{prefix}: {subject}\n\n{body}\n"
