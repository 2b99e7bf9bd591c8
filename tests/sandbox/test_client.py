"""The host side of agentd never waits long on a sandbox its backend has stopped for a cap (issue 33).

The backend is a double at the `Launcher`/`Transport` protocol edge: a channel that answers the first ping and
then stays silent without ending, as a stopped sandbox whose channel a leftover process holds open would.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from bot.sandbox.client import STOPPED_WAIT_S, AgentdSandbox
from bot.sandbox.egress_policy import EgressPolicy
from bot.sandbox.protocol import Cap, CapReached, Death

WHY = Cap("max_disk", "the agent wrote more than the disk cap (DECODE_MAX_DISK_MB=1, workspace and temp held 9 MiB)")


class SilentChannel:
    """Answers the ping, then nothing, and never ends."""

    def __init__(self) -> None:
        self.sent: list[dict] = []

    def send(self, line: bytes) -> None:
        self.sent.append(json.loads(line))

    def recv(self, timeout: float) -> bytes | None:
        if len(self.sent) == 1 and self.sent[0]["op"] == "ping":
            self.sent.append({"op": "answered"})
            return json.dumps({"id": 1, "ok": True}).encode()
        time.sleep(timeout)
        raise TimeoutError

    def close(self) -> None:
        pass

    def diagnostics(self) -> str:
        return ""


class StoppingBackend:
    """A launcher whose sandbox is stopped for a cap once `stop()` is called."""

    root = "/workspace"

    def __init__(self) -> None:
        self.why: Cap | None = None

    def start(self, policy: EgressPolicy) -> SilentChannel:
        return SilentChannel()

    def stop(self) -> None:
        self.why = WHY

    def stopped(self, now: bool = False, disk: bool = True) -> Cap | None:
        return self.why

    def death(self) -> Death:
        return Death("killed")

    def blocked(self) -> dict[str, int]:
        return {}

    def close(self) -> None:
        pass


def test_a_call_gives_up_soon_after_a_cap_stops_the_sandbox_and_later_calls_at_once() -> None:
    backend = StoppingBackend()
    sandbox = AgentdSandbox(backend, mode="local")  # type: ignore[arg-type]
    threading.Timer(0.5, backend.stop).start()
    began = time.monotonic()
    with pytest.raises(CapReached, match="DECODE_MAX_DISK_MB=1"):
        sandbox.run("sleep 600", timeout=600)
    assert time.monotonic() - began < 0.5 + STOPPED_WAIT_S + 1.5, "waited on a stopped sandbox's silent channel"
    began = time.monotonic()
    with pytest.raises(CapReached):
        sandbox.read_file("README.md")
    assert time.monotonic() - began < 0.5, "a call after the stop is refused without asking"
