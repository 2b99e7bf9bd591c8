"""Work a run does beside itself, off its critical path: each step on a thread, all joined when the run closes.

Two kinds: a step that starts at once (deleting earlier runs' directories), and one that waits until the
run's first model request is out (`after_first_request`: making the next run's kept tree), since that
request is what a user waits for and the model's answer leaves the host idle for seconds.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class Beside:
    """The run's background steps; `seen` is given every transcript event, `join` waits for them all."""

    def __init__(self) -> None:
        self._threads: list[threading.Thread] = []
        self._asked = threading.Event()  # the first model request is out, or the run is closing

    def now(self, step: Callable[[], object], name: str) -> None:
        """Run `step` on a thread from now on."""
        thread = threading.Thread(target=step, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def after_first_request(self, step: Callable[[], object], name: str) -> None:
        """Run `step` on a thread once the first model request is out; at the latest, when the run closes."""
        def waited() -> None:
            self._asked.wait()
            step()

        self.now(waited, name)

    def seen(self, event: dict[str, Any]) -> None:
        """A transcript event: a `model_request` releases the steps that wait for one."""
        if event.get("type") == "model_request":
            self._asked.set()

    def join(self) -> None:
        """Release the waiting steps and wait for every step to end."""
        self._asked.set()
        for thread in self._threads:
            thread.join()
