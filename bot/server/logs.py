"""Structured log lines: one JSON object per line, keyed by delivery and job id, redacted.

A record logged with `extra={PLAIN: True}` is one plain, redacted line instead (`<level>: <message>`):
the setup link an operator copies from the log must not come wrapped in JSON.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import datetime, timezone

from bot.core.errors import DecodeError
from bot.core.redact import Redactor

FIELDS = ("delivery_id", "job_id")
PLAIN = "plain"


class JsonFormatter(logging.Formatter):
    """`{"at", "level", "logger", "msg", "delivery_id"?, "job_id"?, "exc"?}`, secrets redacted; "exc" (the stack)
    only for an unexpected exception, not a `DecodeError`."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self._redactor = redactor

    def format(self, record: logging.LogRecord) -> str:
        if getattr(record, PLAIN, False):
            return self._redactor.redact(f"{record.levelname.lower()}: {record.getMessage()}")
        out = {
            "at": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        out.update({k: getattr(record, k) for k in FIELDS if getattr(record, k, None) is not None})
        if record.exc_info and not isinstance(record.exc_info[1], DecodeError):
            # a DecodeError is an expected failure whose message says what to fix; a stack adds nothing
            out["exc"] = self.formatException(record.exc_info)
        # Redact the values, then encode: escaping first would hide a secret holding `"`, `\` or a
        # control character (and a PEM key's newlines) from the redactor.
        return json.dumps(self._redactor.redact_obj(out), ensure_ascii=False)


def configure_logging(redactor: Redactor, level: int = logging.INFO) -> None:
    """Send every log record to stderr as a redacted JSON line."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(redactor))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("waitress.queue").setLevel(logging.ERROR)
