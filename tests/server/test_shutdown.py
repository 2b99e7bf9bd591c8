"""The process's answer to SIGTERM, SIGINT and SIGUSR1 (bot/server/shutdown.py), in a real child process: the
first stopping signal starts the stop on a thread of its own, a second exits at once; SIGUSR1 dumps the stacks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STOPPING = """
import threading, time
from bot.server.shutdown import on_shutdown
def stop(name):
    print("stopping", name, threading.current_thread().name, flush=True)
    time.sleep(60)
on_shutdown(stop)
print("ready", flush=True)
time.sleep(60)
"""


def child() -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", STOPPING], env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


@pytest.mark.parametrize("first, second", [(signal.SIGTERM, signal.SIGTERM), (signal.SIGINT, signal.SIGTERM)])
def test_the_first_signal_stops_on_a_thread_and_a_second_exits_at_once(first, second):
    proc = child()
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(first)
        assert proc.stdout.readline().split() == ["stopping", first.name, "shutdown"]
        proc.send_signal(second)
        assert proc.wait(timeout=10) == -second  # killed by it: a shell shows 128 + its number
    finally:
        proc.kill()


def test_sigusr1_writes_every_threads_stack_and_the_process_goes_on():
    proc = child()
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGTERM)
        assert proc.stdout.readline().split() == ["stopping", "SIGTERM", "shutdown"]
        proc.send_signal(signal.SIGUSR1)
        dump = []
        while not ("in stop" in "".join(dump) and "line 9 in <module>" in "".join(dump)) and len(dump) < 20:
            dump.append(proc.stderr.readline())  # both threads, whichever the kernel handed the signal to
        assert "in stop" in "".join(dump) and 'File "<string>", line 9 in <module>' in "".join(dump), dump
        assert proc.poll() is None  # a dump, not a stop
    finally:
        proc.kill()
