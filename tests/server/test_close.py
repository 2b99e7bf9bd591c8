"""Closing waitress (bot/server/run.py: `close_server`, what SIGTERM ends with) while it serves a request: the
request is answered, and nothing is logged as an error (the answer was written to the closed trigger, and waitress
logged the traceback: seen in CI with a /healthz poll that met the SIGTERM)."""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import requests
from flask import Flask
from waitress import create_server

from bot.server.run import close_server


def test_a_request_in_flight_when_the_server_closes_gets_its_answer(caplog):
    app, arrived, go_on = Flask(__name__), threading.Event(), threading.Event()

    @app.get("/slow")
    def slow() -> str:
        arrived.set()
        go_on.wait(10)
        return "answered"

    server = create_server(app, host="127.0.0.1", port=0, threads=2)
    loop = threading.Thread(target=server.run, daemon=True)
    loop.start()
    with caplog.at_level(logging.ERROR, logger="waitress"), ThreadPoolExecutor(2) as pool:
        answer = pool.submit(requests.get, f"http://127.0.0.1:{server.effective_port}/slow", timeout=10)
        assert arrived.wait(10)
        closing = pool.submit(close_server, server)  # as SIGTERM does, from a thread of its own
        time.sleep(0.5)
        assert not closing.done(), "the close did not wait for the request it was serving"
        go_on.set()
        closing.result(timeout=10)
        assert answer.result(timeout=10).text == "answered"
    loop.join(timeout=10)
    assert not loop.is_alive(), "waitress did not stop"
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
