"""`decode` with the tests' modal double as its modal client: `python -m tests.fakes.decode_modal_double ARGS`.

For the tests that run the CLI in a child process with SANDBOX_MODE=modal: the
double is injected at the protocol edge (`bot.sandbox.modal.use_client`), then
the real `decode` entry point runs with the given arguments.
"""

from __future__ import annotations

import sys

from bot.cli import main
from bot.sandbox.modal import use_client
from tests.fakes import modal_double

if __name__ == "__main__":
    use_client(modal_double)
    sys.exit(main())
