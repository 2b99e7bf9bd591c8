"""The repository's own instructions for coding agents: AGENTS.md, CLAUDE.md, .github/copilot-instructions.md.

They are read like `.github/decode.yml` (bot/workspace/trusted_files.py): as blobs of the base commit on the host,
never from a pull request's head or the agent's tree, so a fork or the agent cannot write the instructions
it then follows. Together they are capped at `CAP` bytes, and the prompt says where the cut is. A file that
is a symlink or too big to read is skipped with a note, never an error: the run goes on without it. Two
files with the same text (CLAUDE.md a copy of AGENTS.md) are given once.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.core.errors import ConfigError
from bot.workspace.trusted_files import Git, read_trusted

FILES = ("AGENTS.md", "CLAUDE.md", ".github/copilot-instructions.md")
CAP = 32 * 1024
READ_LIMIT = 1024 * 1024  # past this a file is not read at all


@dataclass(frozen=True)
class Instructions:
    """What goes into the system prompt: `parts` as (file, text), the files `used`, and `notes` (skips, cut)."""

    parts: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def used(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.parts)


def load_instructions(git: Git, commit: str) -> Instructions:
    """The instruction files committed at `commit`, in `FILES` order, capped at `CAP` bytes together."""
    parts: list[tuple[str, str]] = []
    notes: list[str] = []
    seen: dict[str, str] = {}
    room = CAP
    for name in FILES:
        try:
            raw = read_trusted(git, commit, name, limit=READ_LIMIT)
        except ConfigError as e:
            notes.append(f"{name} not used: {e}")
            continue
        if raw is None or not raw.strip():
            continue
        text = raw.decode("utf-8", "replace").strip()
        if text in seen:
            notes.append(f"{name} has the same text as {seen[text]}: given once")
            continue
        seen[text] = name
        if room <= 0:
            notes.append(f"{name} not used: the instructions are capped at {CAP // 1024} KB together")
            continue
        data = text.encode()
        if len(data) > room:
            text = data[:room].decode("utf-8", "ignore")
            text += (f"\n[... the rest of {name} ({len(data) - room:,} bytes) is cut here: the repository's "
                     f"instructions are capped at {CAP // 1024} KB together ...]")
            notes.append(f"{name} cut after {room:,} of {len(data):,} bytes (cap {CAP // 1024} KB)")
        room -= len(data)
        parts.append((name, text))
    return Instructions(tuple(parts), tuple(notes))
