"""`decode check` with MCP servers in decode.yml: it lists them, and with `--start` starts each in a sandbox as
a run does (real servers nobody here wrote, tests/support/mcp_servers.py) and lists its tools."""

from __future__ import annotations

import pytest

from tests.cli.test_check import decode_check
from tests.conftest import make_repo
from tests.sandbox.conftest import require
from tests.support import mcp_servers

MODES = ["local", pytest.param("bwrap", marks=pytest.mark.bwrap)]


def repo_with(tmp_path, mcp: str):
    return make_repo(tmp_path / "repo", {"a.py": "", ".github/decode.yml": "mcp:\n" + mcp})


@pytest.mark.parametrize("mode", MODES)
def test_check_lists_the_servers_and_start_lists_their_tools_or_why_not(tmp_path, mode):
    require(mode)
    mcp_servers.installed()
    mcp = mcp_servers.TIME + mcp_servers.server("nope", "python3 -m no_such_mcp_server") + "  docs: {operator: true}\n"
    repo = repo_with(tmp_path, mcp)
    listed = decode_check(tmp_path, "--repo", str(repo), SANDBOX_MODE=mode)
    assert listed.returncode == 0, listed.stderr
    assert "mcp: time: python3 -m mcp_server_time --local-timezone UTC (in the sandbox, after setup)" in listed.stdout
    assert "mcp: docs (the operator's, but DECODE_MCP_SERVERS offers none of that name" in listed.stdout
    started = decode_check(tmp_path, "--repo", str(repo), "--start", SANDBOX_MODE=mode)
    assert started.returncode == 1, started.stderr
    assert "mcp time: started (MCP 2025-11-25), tools: get_current_time, convert_time" in started.stdout
    assert "mcp nope: did not start: it exited with status 1 (" in started.stdout
    assert "mcp docs: did not start: the operator offers no MCP server docs" in started.stdout
    assert "a run would start" not in started.stdout  # no "ok" above the servers that did not start
    assert started.stdout.splitlines()[-1] == ("not ok: the settings and decode.yml are valid, but MCP server "
                                               "nope, docs did not start (above)")


def test_start_with_servers_that_all_start_exits_0(tmp_path):
    mcp_servers.installed()
    res = decode_check(tmp_path, "--repo", str(repo_with(tmp_path, mcp_servers.GIT)), "--start", SANDBOX_MODE="local")
    assert res.returncode == 0, res.stderr
    assert "mcp git: started" in res.stdout and "git_status" in res.stdout
    assert res.stdout.splitlines()[-1] == "ok: a run would start with these settings"  # after the servers started


def test_start_stops_at_a_required_server_as_a_run_does(tmp_path):
    repo = repo_with(tmp_path, mcp_servers.server("nope", "python3 -m no_such_mcp_server", required=True))
    res = decode_check(tmp_path, "--repo", str(repo), "--start", SANDBOX_MODE="local")
    assert res.returncode == 1, res.stderr
    said = res.stdout.splitlines()
    assert said[-2].startswith("mcp nope: the MCP server nope (required: true in .github/decode.yml) did not start: "
                               "it exited with status 1"), said
    assert said[-1] == "not ok: the settings and decode.yml are valid, but MCP server nope did not start (above)"
