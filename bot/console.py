"""The console script `decode`: Ctrl-C while Python is still importing decode-bot (the first fifth of a second)
ends it as it ends any command, by the signal, instead of a KeyboardInterrupt traceback; from `bot.cli.main` on,
Ctrl-C is decode's own (the work kept, exit status 130)."""

from __future__ import annotations

import signal


def main() -> int:
    """Import the command line with Ctrl-C at its default action, then run it with Python's handler back."""
    previous = signal.signal(signal.SIGINT, signal.SIG_DFL)
    from bot.cli import main as cli

    signal.signal(signal.SIGINT, previous)
    return cli()
