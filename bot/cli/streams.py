"""The `decode` process's standard streams when their other end is closed.

- stdout closed or its reader gone (`decode check | head -1`): output ends quietly; on a full disk
  (`>/dev/full`) one line on stderr says its output is lost. Once a write
  meets EPIPE, descriptor 1 points at /dev/null and the command goes on to its own exit status;
  no BrokenPipeError traceback, none at interpreter exit either.
- stderr: where decode says what it does and what went wrong. Closed at start (`2>&-`) or a pipe
  nobody reads: one line on stdout naming the fix, exit status 2, before any work (otherwise a
  run's first progress line raised BrokenPipeError and the run failed unseen, "did not start").
  A reader that goes away later (a `| tee` killed mid-run) only silences it, like stdout.
- A log record of the command line's doors (a run on GitHub logs a failure nobody foresaw) is one line on
  stderr, as Python's last-resort handler shows it, but its traceback goes to a private crash file the line
  names, as for an unexpected error of the command itself.
- A closed descriptor 0, 1 or 2 points at /dev/null before anything is opened: otherwise the next
  file opened (the job store, a transcript) would take its number, and every child process
  (git, docker) would write its own output into that file.
"""

from __future__ import annotations

import logging
import os
import select
import sys
import tempfile
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

STDERR_CLOSED = ("decode: standard error is closed, and decode says there what it does and what went wrong: "
                 "give it somewhere to go (2>/dev/null to drop it, 2>FILE to keep it)")


def _gone(fd: int) -> bool:
    """Whether `fd` is closed, or a pipe or socket whose reader is gone."""
    try:
        os.fstat(fd)
    except OSError:
        return True
    poll = select.poll()
    poll.register(fd, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poll.poll(0))


def _to_devnull(fd: int) -> None:
    null = os.open(os.devnull, os.O_RDWR)
    if null != fd:
        os.dup2(null, fd)
        os.close(null)


class _Quiet:
    """A text stream that goes quiet when its reader is gone: on EPIPE its descriptor is pointed at /dev/null
    and the text dropped."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as error:
            self._silence(error)
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as error:
            self._silence(error)
            self._stream.flush()  # the buffered text, now to /dev/null

    def _silence(self, error: OSError) -> None:
        """Point the descriptor at /dev/null; a write that failed otherwise than by a gone reader (stdout on a
        full disk, `>/dev/full`) is said once on stderr, since what was written there is lost."""
        fd = self._stream.fileno()
        _to_devnull(fd)
        if not isinstance(error, BrokenPipeError) and fd == 1:
            print(f"decode: standard output could not be written ({error.strerror}): what it printed is lost; "
                  "send it where there is room", file=sys.stderr, flush=True)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextmanager
def guarded_streams() -> Iterator[str | None]:
    """While active, stdout and stderr go quiet when their reader goes away; yields `STDERR_CLOSED` when stderr
    is unusable from the start (the caller says so on stdout and stops), else None."""
    stderr_gone = _gone(2)
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            _to_devnull(fd)
    saved = sys.stdout, sys.stderr
    if sys.stdout is not None:
        sys.stdout = _Quiet(sys.stdout)
    if sys.stderr is not None:
        sys.stderr = _Quiet(sys.stderr)
    try:
        yield STDERR_CLOSED if stderr_gone else None
    finally:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
        sys.stdout, sys.stderr = saved


def crash_report(error: BaseException) -> str:
    """The path of a new private file (mode 0600) holding `error`'s traceback, for a bug report."""
    fd, path = tempfile.mkstemp(prefix="decode-crash-", suffix=".txt")
    with os.fdopen(fd, "w") as report:
        traceback.print_exception(error, file=report)
    return path


class OneLineLogs(logging.Handler):
    """Warnings and errors on stderr, one line each (the message, as the last-resort handler prints it); a
    record's traceback goes to a crash report the line names (it was printed on the terminal)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = record.getMessage()
            if record.exc_info and record.exc_info[1] is not None:
                error = record.exc_info[1]
                line += f" ({type(error).__name__}: a bug in decode-bot; its traceback is in {crash_report(error)})"
            print(line, file=sys.stderr, flush=True)
        except Exception:  # noqa: BLE001 (logging's own contract: a handler never raises)
            self.handleError(record)


def one_line_logs() -> None:
    """Route the root logger's warnings and errors through `OneLineLogs`, once, unless something configured it
    (decode serve and decode worker log JSON lines of their own)."""
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(OneLineLogs())
