"""Per-call cost of an MCP tool against a `bash -c true` call, on each sandbox backend.

    python3 bench/mcp_call.py [--n 200] [--modes local,bwrap,docker,modal]

Each backend's sandbox (docker: the tests' image of its own tag with the servers installed; modal: the
tests' double) starts two MCP servers as a run does (`McpServers.start`): `mcp-server-time` from PyPI (a
real server, the official SDK's server side) and tests/support/mcp_stub.py in `echo` mode (standard library,
so the relay's own cost). Through the run's `Toolset`, interleaved in rounds so machine noise hits all alike,
it times `bash` running `true`, `mcp__time__get_current_time` and `mcp__stub__shell`, and prints medians,
p90 and the ratio to the bash call. Target (issue 35): an MCP call within 1.5x of the bash call.

Then how long `McpServers.start` takes for --many `mcp-server-time` servers, started together (as a run does)
against the same servers started one after the other, alternated over --start-rounds.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.agent.mcp import McpServers  # noqa: E402
from bot.agent.tools import DEFAULT_TOOLS  # noqa: E402
from bot.config import Settings  # noqa: E402
from bot.run.repo_config import McpServer  # noqa: E402
from bot.sandbox import SandboxSpec, open_sandbox  # noqa: E402
from tests.support import mcp_servers  # noqa: E402

TARGET_X_BASH = 1.5
CALLS = {"bash -c true": ("bash", {"command": "true"}),
         "mcp time": ("mcp__time__get_current_time", {"timezone": "UTC"}),
         "mcp stub (echo)": ("mcp__stub__shell", {"command": "true"})}


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def workspace() -> Path:
    path = Path(tempfile.mkdtemp(prefix="decode-bench-mcp-"))
    (path / "stub.py").write_text((ROOT / "tests" / "support" / "mcp_stub.py").read_text())
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


def open_mode(mode: str, path: Path):
    if mode == "modal":
        from bot.sandbox.modal import use_client
        from tests.fakes import modal_double
        use_client(modal_double)
    image = mcp_servers.image("decode-sandbox:latest") if mode == "docker" else "decode-sandbox:latest"
    return open_sandbox(mode, SandboxSpec(workspace=path, image=image, name="decode-bench-mcp"))


def time_server(name: str) -> McpServer:
    return McpServer(name, "python3 -m mcp_server_time --local-timezone UTC", (("PYTHONPATH", str(mcp_servers.SITE)),))


def start_ms(sandbox, names: list[str]) -> float:
    """How long starting time servers `names` in `sandbox` together takes, to their tools listed."""
    servers = McpServers(tuple(time_server(name) for name in names), Settings().mcp, lambda kind, **event: None,
                         print)
    try:
        took = timed(lambda: servers.start(sandbox))
        assert len(servers.tools) == 2 * len(names), "a server did not start"
        return took
    finally:
        servers.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--modes", default="local,bwrap,docker,modal")
    parser.add_argument("--start-rounds", type=int, default=5)
    parser.add_argument("--many", type=int, default=4)
    args = parser.parse_args()
    mcp_servers.installed()
    specs = (time_server("time"), McpServer("stub", "python3 stub.py echo"))
    settings = Settings().mcp
    print(f"{'backend':<8}{'call':<18}{'median ms':>10}{'p90 ms':>9}{'x bash':>8}  verdict (target {TARGET_X_BASH}x)")
    for mode in args.modes.split(","):
        path = workspace()
        try:
            sandbox = open_mode(mode, path)
        except Exception as e:  # noqa: BLE001 - a missing backend is reported, not fatal
            print(f"{mode}: unavailable ({e})")
            continue
        servers = McpServers(specs, settings, lambda kind, **event: None, print)
        try:
            servers.start(sandbox)
            tools = DEFAULT_TOOLS.plus(servers.tools)
            samples: dict[str, list[float]] = {name: [] for name in CALLS}
            for round_ in range(args.n + 20):
                for name, (tool, call) in CALLS.items():
                    took = timed(lambda: tools.call(sandbox, tool, call, time_left=60))
                    if round_ >= 20:  # warm-up
                        samples[name].append(took)
            bash = statistics.median(samples["bash -c true"])
            for name, values in samples.items():
                med, p90 = statistics.median(values), statistics.quantiles(values, n=10)[-1]
                verdict = "" if name.startswith("bash") else ("ok" if med <= TARGET_X_BASH * bash else "OVER TARGET")
                print(f"{mode:<8}{name:<18}{med:>10.2f}{p90:>9.2f}{med / bash:>8.2f}  {verdict}")
            names = [f"time{i}" for i in range(args.many)]
            together, serial = [], []
            for _ in range(args.start_rounds):  # alternated, so noise hits both alike
                together.append(start_ms(sandbox, names))
                serial.append(sum(start_ms(sandbox, [name]) for name in names))
            both, each = statistics.median(together), statistics.median(serial)
            print(f"{mode:<8}start {args.many} servers: together {both:.0f} ms, one after the other {each:.0f} ms, "
                  f"{both / each:.2f}x one after the other")
        finally:
            servers.close()
            sandbox.close()
            shutil.rmtree(path, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
