"""Which git failures are worth another try: a remote that answered 5xx or 429, or a connection that broke
mid-transfer, as GitHub's git endpoints do now and then. A refused token, a missing repository or ref, or a
push GitHub rejected fails at once: trying again cannot change it.

The REST API has its own policy (bot/github/retry.py); this one covers the git commands that talk to a remote
(`clone`, `fetch`, `ls-remote`, `push`), in `bot.workspace.clone._git`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

ATTEMPTS = 3  # a transient failure is tried twice more, after about 1 s and 2 s
NETWORK_VERBS = ("clone", "fetch", "ls-remote", "push")
TRANSIENT = re.compile(
    r"The requested URL returned error: (?:5\d\d|429)"
    r"|Connection reset|Connection timed out|Operation timed out|Failed to connect to|Could not resolve host"
    r"|early EOF|RPC failed|the remote end hung up unexpectedly|unexpected disconnect"
    r"|transfer closed with outstanding read data|TLS connection was non-properly terminated|SSL_read|GnuTLS recv",
    re.IGNORECASE)


def verb(args: Sequence[str]) -> str:
    """The git subcommand of `args` (after any `-c name=value` and other global options)."""
    after_c = False
    for arg in args:
        if after_c:
            after_c = False
        elif arg == "-c":
            after_c = True
        elif not arg.startswith("-"):
            return arg
    return ""


def retryable(args: Sequence[str], stderr: str) -> bool:
    """Whether git `args`, failed with `stderr`, talked to a remote and failed in a way that may pass."""
    return verb(args) in NETWORK_VERBS and TRANSIENT.search(stderr) is not None
