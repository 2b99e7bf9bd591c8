"""Files made on first use, raced for on a fresh data dir by real processes, each with worker threads (as
`decode serve` runs jobs on threads and `decode worker` processes share its data dir): every racer finds the
file whole, and all agree on its content."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROCESSES = 4
THREADS = 4
ROUNDS = 5

# Each process imports, starts its threads, then waits on the pipe until the parent closes it: every thread
# of every process makes the files at once. A thread prints what it read, or the error it got.
RACER = """
import os, sys, threading
from pathlib import Path
from bot.core.keys import data_key
from bot.github.app_credentials import StoredApp, load, save
data = Path(sys.argv[2])
app = StoredApp(id=1, slug="s", html_url="https://github.test/apps/s", client_id="c", pem="p" * 9000,
                webhook_secret="w", client_secret="x")
go, said = threading.Event(), threading.Lock()
def first_use():
    go.wait()
    try:
        save(data, app)
        line = f"{data_key(data, 'link.key').hex()} {load(data) == app}"
    except Exception as e:
        line = f"error: {e}"
    with said:
        print(line, flush=True)
threads = [threading.Thread(target=first_use) for _ in range(int(sys.argv[3]))]
for t in threads:
    t.start()
os.read(int(sys.argv[1]), 1)
go.set()
"""


def race(data: Path) -> list[str]:
    """What each thread of PROCESSES processes read when they made data's first-use files at the same moment."""
    go_read, go_write = os.pipe()
    racers = [subprocess.Popen([sys.executable, "-c", RACER, str(go_read), str(data), str(THREADS)], cwd=ROOT,
                               text=True, pass_fds=(go_read,), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
              for _ in range(PROCESSES)]
    os.close(go_read)
    time.sleep(1.0)  # every racer has imported what it needs and waits in its read
    os.close(go_write)  # every racer's read returns now
    return [line for r in racers for line in r.communicate(timeout=60)[0].splitlines()]


def test_concurrent_first_use_finds_one_whole_key_and_app(tmp_path: Path) -> None:
    for n in range(ROUNDS):
        data = tmp_path / f"data{n}"
        lines = race(data)
        assert len(lines) == PROCESSES * THREADS and len(set(lines)) == 1, sorted(set(lines))
        key, app_whole = lines[0].split()
        assert len(bytes.fromhex(key)) == 32 and app_whole == "True"
        assert sorted(p.name for p in data.iterdir()) == ["app.json", "link.key"]  # no temporary file left
        assert (data / "link.key").stat().st_mode & 0o777 == 0o600
