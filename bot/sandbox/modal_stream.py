"""agentd's channel in a Modal sandbox: its lines over the stdin and stdout of one `Sandbox.exec`
(bot/sandbox/modal.py), and writes to a Modal stdin, which takes at most 2 MiB between drains."""

from __future__ import annotations

import threading
from typing import Any

from bot.core.errors import SandboxError
from bot.sandbox.protocol import ANSWER_CAP, QueuedLines

CHUNK = 1024 * 1024  # below modal.io_streams.MAX_BUFFER_SIZE (2 MiB), which a stdin write must not pass


class ModalTransport(QueuedLines):
    """agentd's stdin/stdout over a Modal `ContainerProcess`, read by a thread like ProcessTransport."""

    def __init__(self, process: Any) -> None:
        super().__init__()
        self._proc = process
        self._stderr = bytearray()
        self._error = ""
        threading.Thread(target=self._pump, daemon=True).start()
        threading.Thread(target=self._pump_stderr, daemon=True).start()

    def _pump(self) -> None:
        pending = bytearray()  # split when a chunk brings a newline: a 13 MB line in 64 KB chunks, 0.63 -> 0.02 s
        try:
            for chunk in self._proc.stdout:
                pending += (data := chunk.encode() if isinstance(chunk, str) else bytes(chunk))
                lines: list[bytearray] = []
                if b"\n" in data:
                    *lines, rest = pending.split(b"\n")
                    pending = bytearray(rest)
                if len(pending) > ANSWER_CAP or any(len(line) >= ANSWER_CAP for line in lines):
                    self.overlong, pending = True, bytearray()
                    break
                for line in lines:
                    self._lines.put(bytes(line) + b"\n")
        except Exception as e:  # the stream broke: the sandbox is gone
            self._error = f"{type(e).__name__}: {e}"
        finally:
            if pending:
                self._lines.put(bytes(pending))
            self._lines.put(None)

    def _pump_stderr(self) -> None:
        try:
            for chunk in self._proc.stderr:
                self._stderr += chunk.encode() if isinstance(chunk, str) else bytes(chunk)
                del self._stderr[:-4000]
        except Exception:
            pass

    def send(self, line: bytes) -> None:
        try:
            write_all(self._proc.stdin, line)
        except Exception as e:
            raise SandboxError(f"the sandbox process has exited ({type(e).__name__}: {e}): "
                               f"{self.diagnostics()}") from None

    def diagnostics(self) -> str:
        text = bytes(self._stderr[-2000:]).decode("utf-8", "replace").strip()
        if text or self._error:
            return " ".join(p for p in (text, self._error) if p)
        try:
            return f"exit status {self._proc.poll()}"
        except Exception as e:
            return f"exit status unknown ({e})"

    def close(self) -> None:
        try:
            self._proc.stdin.write_eof()
            self._proc.stdin.drain()
        except Exception:
            pass


def write_all(stdin: Any, data: bytes) -> None:
    """Write and drain in chunks: Modal's stdin takes at most 2 MiB between drains (MAX_BUFFER_SIZE)."""
    for offset in range(0, len(data), CHUNK):
        stdin.write(data[offset:offset + CHUNK])
        stdin.drain()
