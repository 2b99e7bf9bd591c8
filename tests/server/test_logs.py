"""The JSON log lines of `decode serve`: secrets are redacted before the line is JSON-encoded."""

from __future__ import annotations

import io
import json
import logging

import pytest

from bot.core.redact import Redactor
from bot.server.logs import JsonFormatter


def emit(redactor: Redactor, msg: str, *args: object, **extra: object) -> str:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter(redactor))
    logger = logging.getLogger("decode.test-logs")
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(logging.INFO)
    try:
        logger.info(msg, *args, extra=extra)
    finally:
        logger.handlers[:] = []
    return stream.getvalue()


@pytest.mark.parametrize("secret", ['pa"ss-word-0123456789', "back\\slash-0123456789",
                                    "tab\tand\nnewline-0123456789", "gehéim-wört-0123456789"])
def test_a_secret_that_json_escapes_is_redacted_in_the_line(secret: str) -> None:
    line = emit(Redactor([secret]), "token is %s; done", secret, delivery_id=f"d-{secret}")
    record = json.loads(line)
    assert record["msg"] == "token is [REDACTED:secret]; done"
    assert record["delivery_id"] == "d-[REDACTED:secret]"
    for text in (secret, json.dumps(secret)[1:-1]):
        assert text not in line


def test_an_exception_traceback_is_redacted() -> None:
    secret = 'exc"secret-0123456789'
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter(Redactor([secret])))
    logger = logging.getLogger("decode.test-logs-exc")
    logger.handlers[:] = [handler]
    logger.propagate = False
    try:
        raise RuntimeError(f"failed with {secret}")
    except RuntimeError:
        logger.exception("boom")
    logger.handlers[:] = []
    line = stream.getvalue()
    assert "[REDACTED:secret]" in json.loads(line)["exc"]
    assert "exc" in line and json.dumps(secret)[1:-1] not in line and secret not in line
