"""One conformance suite for every sandbox backend (local, bwrap, docker).

Each case runs against each backend available here (see conftest.py); the
isolation cases only against bwrap and docker, which promise it.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bot.sandbox import EgressPolicy, Refused, Sandbox
from bot.sandbox.client import OUTPUT_CAP
from bot.sandbox.protocol import CapReached
from tests.conftest import git

FIND_CMDLINE = """python3 - {marker} <<'EOF'
import os, sys
me = str(os.getpid())
for pid in os.listdir("/proc"):
    if pid.isdigit() and pid != me:
        try:
            cmd = open("/proc/%s/cmdline" % pid, "rb").read().replace(b"\\0", b" ").decode()
        except OSError:
            continue
        if sys.argv[1] in cmd and "python3 -" not in cmd:
            print(pid, cmd)
EOF"""

AGENTD_PEAK_KB = """python3 - <<'EOF'
import os
pid = os.getpid()
while pid > 1:
    fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    pid = int(fields[1])
    if any(arg.endswith(b"/agentd.pyz") for arg in open("/proc/%d/cmdline" % pid, "rb").read().split(b"\\0")):
        status = open("/proc/%d/status" % pid).read()
        print([l.split()[1] for l in status.splitlines() if l.startswith("VmHWM")][0])
        break
EOF"""

INTERFACES = "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"

CONNECT = """python3 - {port} <<'EOF'
import socket, sys
host = "127.0.0.1"
if sys.argv[1:]:  # through the default gateway when there is one
    for line in open("/proc/net/route").read().splitlines()[1:]:
        f = line.split()
        if f[1] == "00000000":
            host = socket.inet_ntoa(bytes.fromhex(f[2])[::-1])
try:
    socket.create_connection((host, int(sys.argv[1])), timeout=2).close()
    print("connected", host)
except OSError as e:
    print("failed", host, e)
EOF"""


# --- commands ---------------------------------------------------------------


def test_echo_and_exit_code(sandbox: Sandbox) -> None:
    result = sandbox.run("echo hello; echo oops >&2; exit 3")
    assert result.exit_code == 3
    assert result.output == "hello\noops\n"
    assert not result.timed_out and result.dropped_bytes == 0


def test_cwd_is_the_workspace(sandbox: Sandbox) -> None:
    result = sandbox.run("pwd; ls")
    assert result.output.splitlines()[0] == sandbox.root
    assert "README.md" in result.output.split()


def test_timeout_kills_the_whole_process_tree(sandbox: Sandbox) -> None:
    marker = "3%d.5" % secrets.randbelow(10**6)
    started = time.monotonic()
    result = sandbox.run(f"sleep {marker} & sleep {marker}", timeout=1)
    assert result.timed_out and result.exit_code is None
    assert time.monotonic() - started < 6
    assert sandbox.run(FIND_CMDLINE.format(marker=marker)).output == ""


def test_a_command_that_closes_its_output_still_times_out(sandbox: Sandbox) -> None:
    result = sandbox.run("echo early; exec >/dev/null 2>&1; sleep 30", timeout=1)
    assert result.timed_out and result.output == "early\n"
    assert result.duration_s < 5


def test_background_children_do_not_outlive_their_command(sandbox: Sandbox) -> None:
    marker = "4%d.5" % secrets.randbelow(10**6)
    started = time.monotonic()
    result = sandbox.run(f"sleep {marker} & echo started")
    assert result.exit_code == 0 and result.output == "started\n"
    assert time.monotonic() - started < 3
    assert sandbox.run(FIND_CMDLINE.format(marker=marker)).output == ""


@pytest.mark.parametrize("launch", [
    "setsid sh -c {loop} >/dev/null 2>&1 </dev/null &",
    "( nohup sh -c {loop} >/dev/null 2>&1 </dev/null & ) ; sleep 0.01",
    "( setsid sh -c {loop_bg} >/dev/null 2>&1 </dev/null & ) ; sleep 0.01",
], ids=["setsid", "nohup-double-fork", "setsid-double-fork"])
def test_a_detached_watcher_stops_when_its_call_returns(sandbox: Sandbox, launch: str) -> None:
    loop = "'while :; do echo tick >> watch.log; sleep 0.05; done'"
    loop_bg = "'(while :; do echo tick >> watch.log; sleep 0.05; done) & exit 0'"  # its parent exits too
    result = sandbox.run(launch.format(loop=loop, loop_bg=loop_bg) + "\nsleep 0.3; echo launched")
    assert result.exit_code == 0 and result.output == "launched\n"
    written = sandbox.read_file("watch.log")
    assert written.count(b"tick") >= 2, "the watcher ran while its call did"
    time.sleep(0.5)
    assert sandbox.read_file("watch.log") == written, "the watcher kept writing after its call returned"


def test_output_flood_is_capped_and_agentd_stays_small(sandbox: Sandbox) -> None:
    started = time.monotonic()
    result = sandbox.run("yes", timeout=2)
    assert result.timed_out
    assert time.monotonic() - started < 8
    assert len(result.output.encode()) <= OUTPUT_CAP + 200
    assert result.dropped_bytes > 10 * OUTPUT_CAP
    assert "bytes dropped by the sandbox" in result.output
    peak_kb = int(sandbox.run(AGENTD_PEAK_KB).output)
    assert peak_kb < 64 * 1024, "agentd keeps only the capped head and tail"


# --- files ------------------------------------------------------------------


def test_files_write_read_glob_grep(sandbox: Sandbox, workspace: Path) -> None:
    sandbox.write_file("src/pkg/new.py", b"def added():\n    return 3\n")
    assert (workspace / "src/pkg/new.py").read_bytes() == b"def added():\n    return 3\n"
    assert sandbox.read_file("src/app.py") == b"def main():\n    return 1\n"
    assert sorted(sandbox.glob("**/*.py")) == ["src/app.py", "src/pkg/new.py", "src/util.py"]
    assert sandbox.glob("*.md") == ["README.md"]
    assert sorted(sandbox.grep(r"def \w+", glob="*.py")) == [
        "src/app.py:1:def main():", "src/pkg/new.py:1:def added():", "src/util.py:1:def helper():",
    ]
    assert sandbox.grep("helper", path="src/util.py") == ["src/util.py:1:def helper():"]
    with pytest.raises(Refused, match="does not exist"):
        sandbox.read_file("missing.txt")


@pytest.fixture
def escapes(workspace: Path, tmp_path: Path) -> Iterator[Path]:
    """Symlinks in the workspace that lead out of it: to /etc, to a host dir, and `..`."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("host secret\n")
    (workspace / "to_etc").symlink_to("/etc")
    (workspace / "to_host").symlink_to(outside)
    (workspace / "up").symlink_to("..")
    (workspace / "passwd_link").symlink_to("/etc/passwd")
    yield outside


@pytest.mark.parametrize("path", [
    "to_etc/passwd", "passwd_link", "to_host/secret.txt", "up/outside/secret.txt",
    "../outside/secret.txt", "/etc/passwd", "src/../../outside/secret.txt",
])
def test_paths_outside_the_workspace_are_refused(sandbox: Sandbox, escapes: Path, path: str) -> None:
    with pytest.raises(Refused, match="outside the workspace"):
        sandbox.read_file(path)
    with pytest.raises(Refused, match="outside the workspace"):
        sandbox.write_file(path, b"overwritten")
    assert (escapes / "secret.txt").read_text() == "host secret\n"


def test_glob_and_grep_refuse_outside_dirs(sandbox: Sandbox, escapes: Path) -> None:
    for call in (lambda: sandbox.glob("*", path="to_host"), lambda: sandbox.grep("secret", path="to_host"),
                 lambda: sandbox.grep("root", path="/etc")):
        with pytest.raises(Refused, match="outside the workspace"):
            call()


# --- export_patch -------------------------------------------------------------


def test_export_patch_has_new_changed_deleted_and_binary_files_but_no_git_dir(
    sandbox: Sandbox, workspace: Path, tmp_path: Path
) -> None:
    base = git(workspace, "rev-parse", "HEAD")
    sandbox.write_file("src/app.py", b"def main():\n    return 42\n")
    sandbox.write_file("new/notes.txt", b"fresh\n")
    sandbox.write_file("assets/blob.bin", bytes(range(256)) * 4)
    sandbox.run("rm docs/old.txt && echo junk > .git/planted && mkdir -p sub/.git && echo x > sub/.git/y")
    patch = sandbox.export_patch(base)
    assert b"diff --git a/src/app.py b/src/app.py" in patch
    assert b"+++ b/new/notes.txt" in patch
    assert b"GIT binary patch" in patch and b"assets/blob.bin" in patch
    assert b"deleted file mode" in patch and b"docs/old.txt" in patch
    assert b".git/" not in patch.replace(b".gitattributes", b"")
    clone = tmp_path / "clone"
    (tmp_path / "gitconfig").write_text("[safe]\n\tdirectory = *\n")  # git 2.39's upload-pack drops -c
    subprocess.run(["git", "clone", "-q", str(workspace), str(clone)], check=True,  # the docker sandbox's uid
                   env={**os.environ, "GIT_CONFIG_GLOBAL": str(tmp_path / "gitconfig")})  # owns it while it runs
    subprocess.run(["git", "apply", "--index", "-"], input=patch, cwd=clone, check=True)
    assert (clone / "assets/blob.bin").read_bytes() == bytes(range(256)) * 4
    assert (clone / "src/app.py").read_text() == "def main():\n    return 42\n"


def test_export_patch_never_runs_code_planted_in_git(sandbox: Sandbox, workspace: Path) -> None:
    base = git(workspace, "rev-parse", "HEAD")
    root = sandbox.root
    touch = lambda name: f"\"sh -c 'touch {root}/MARK_{name}; cat'\""  # noqa: E731
    sandbox.write_file(".git/hooks/pre-commit", f"#!/bin/sh\ntouch {root}/MARK_hook\n".encode())
    sandbox.write_file(".git/hooks/post-index-change", f"#!/bin/sh\ntouch {root}/MARK_hook2\n".encode())
    sandbox.write_file(".git/fsmonitor.sh", f"#!/bin/sh\ntouch {root}/MARK_fsmonitor\n".encode())
    sandbox.run("chmod +x .git/hooks/* .git/fsmonitor.sh")
    config = sandbox.read_file(".git/config").decode() + (
        f"[core]\n\tfsmonitor = {root}/.git/fsmonitor.sh\n\thooksPath = .git/hooks\n"
        f"\tpager = {touch('pager')}\n"
        f'[filter "evil"]\n\tclean = {touch("clean")}\n\tsmudge = {touch("smudge")}\n\trequired = true\n'
        f'[diff "evil"]\n\ttextconv = {touch("textconv")}\n\tcommand = {touch("extdiff")}\n'
        f"[diff]\n\texternal = {touch('external')}\n"
    )
    sandbox.write_file(".git/config", config.encode())
    sandbox.write_file(".gitattributes", b"* filter=evil diff=evil\n")
    sandbox.write_file("src/app.py", b"changed\n")
    patch = sandbox.export_patch(base)
    assert b"+changed" in patch and b"+* filter=evil diff=evil" in patch
    assert sorted(p.name for p in workspace.glob("MARK_*")) == []
    sandbox.run("git status --short >/dev/null 2>&1; git add -A >/dev/null 2>&1")
    assert {"MARK_fsmonitor", "MARK_clean"} <= {p.name for p in workspace.glob("MARK_*")}, "the plants are live"


def test_export_patch_refuses_a_bad_base(sandbox: Sandbox) -> None:
    with pytest.raises(Refused, match="full commit id"):
        sandbox.export_patch("HEAD; touch /tmp/x")


def test_the_hand_back_check_and_export_leave_out_what_the_host_will_not_carry(
    sandbox: Sandbox, workspace: Path
) -> None:
    base = git(workspace, "rev-parse", "HEAD")
    sandbox.run("mkdir -p sub && ln -s .. sub/up && ln -s sub/up/sub/up/../../../etc/passwd chained"
                " && ln -s sub/up/README.md readme && head -c 3000000 /dev/zero > big.bin && echo ok > ok.txt")
    found = sandbox.check_hand_back(base, max_file_bytes=2 * 1024 * 1024)
    assert sorted(found) == ["big.bin", "chained"] and "resolves outside" in found["chained"]
    hand = sandbox.hand_back(base, max_file_bytes=2 * 1024 * 1024)
    assert list(hand.left_out) == ["big.bin"] and b"big.bin" not in hand.patch and b"+ok" in hand.patch
    assert len(sandbox.hand_back(base).patch) > len(hand.patch)


# --- environment --------------------------------------------------------------


def test_no_host_variable_reaches_the_sandbox(
    mode: str, workspace: Path, open_box: Callable[..., Sandbox], monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-ant-test-secret-" + secrets.token_hex(8)
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret)
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_" + secret)
    monkeypatch.setenv("DECODE_CANARY", secret)
    box = open_box(mode, workspace)
    env = box.run("env").output
    assert secret not in env and "ANTHROPIC_API_KEY" not in env and "GITHUB_TOKEN" not in env
    assert f"DECODE_SANDBOX={mode}" in env
    scope = "/proc/[0-9]*" if mode != "local" else "/proc/self /proc/$PPID"
    dump = box.run(f"for p in {scope}; do cat $p/environ 2>/dev/null; echo; done | tr '\\0' '\\n'").output
    assert "PATH=" in dump
    assert secret not in dump


def test_commands_see_the_shell_they_run_in_and_a_utf8_locale(sandbox: Sandbox) -> None:
    """SHELL is set (bash would otherwise look the user up in the passwd database on every start) and
    the locale stays C.UTF-8, whatever way the image stores it."""
    out = sandbox.run("echo $SHELL; printenv SHELL; locale charmap; printf '\\u00e9' | wc -m").output.split()
    assert out == ["/bin/bash", "/bin/bash", "UTF-8", "1"]


# --- isolation (bwrap, docker) --------------------------------------------------


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP port listening on every host address."""
    server = socket.create_server(("0.0.0.0", 0))
    server.listen(8)
    yield server.getsockname()[1]
    server.close()


def test_network_is_off_unless_asked(
    isolated_mode: str, workspace: Path, open_box: Callable[..., Sandbox], listener: int
) -> None:
    """Off by default and after the setup phase. bwrap and docker never get more than loopback: with the
    internet allowed their way out is the egress proxy (tests/security/test_egress.py), never the host."""
    box = open_box(isolated_mode, workspace)
    probe = CONNECT.format(port=listener)
    assert box.run(INTERFACES).output.split() == ["lo"]
    assert box.run(probe).output.startswith("failed")
    box.set_network(EgressPolicy(internet=True))
    if isolated_mode != "modal":  # the modal double shares the host's network where Modal's would be open
        assert box.run(INTERFACES).output.split() == ["lo"]
        assert box.run(probe).output.startswith("failed"), "no direct way to the host"
        assert box.run("echo $https_proxy").output.startswith("http://127.0.0.1:")
    box.set_network(EgressPolicy())
    assert box.run(probe).output.startswith("failed")
    assert box.run(INTERFACES).output.split() == ["lo"]


def test_fork_bomb_is_contained(isolated_mode: str, workspace: Path, open_box: Callable[..., Sandbox]) -> None:
    box = open_box(isolated_mode, workspace, pids=64)
    latencies: list[float] = []
    done = threading.Event()

    def probe_host() -> None:
        while not done.is_set():
            started = time.monotonic()
            subprocess.run(["true"], check=True, timeout=10)
            latencies.append(time.monotonic() - started)
            time.sleep(0.1)

    prober = threading.Thread(target=probe_host)
    prober.start()
    try:
        result = box.run(":(){ :|:& };:; sleep 5", timeout=3)
    finally:
        done.set()
        prober.join()
    assert result.timed_out
    assert "Resource temporarily unavailable" in result.output, "the bomb reached the pids limit"
    assert max(latencies) < 1.0, "the host stays responsive"
    after = box.run("echo ok; ls -d /proc/[0-9]* | wc -l", timeout=30)
    lines = after.output.split()
    assert after.exit_code == 0 and lines[0] == "ok"
    assert int(lines[1]) < 12, "no bomb process survives"


def test_memory_hog_is_limited(isolated_mode: str, workspace: Path, open_box: Callable[..., Sandbox]) -> None:
    box = open_box(isolated_mode, workspace, memory_mb=256)
    hog = "python3 -c \"b = b'x' * (1024 * 1024 * 1024); print(len(b))\""
    if isolated_mode == "modal":  # Modal reports no out-of-memory kill (docs/sandboxes.md): only the command dies
        result = box.run(hog, timeout=30)
        assert not result.timed_out and result.exit_code != 0 and "1073741824" not in result.output
        assert box.run("echo alive").output == "alive\n"
        return
    with pytest.raises(CapReached, match="DECODE_MAX_MEMORY_MB=256") as cap:  # the memory cap: the run ends there
        box.run(hog, timeout=30)
    assert cap.value.stop_reason == "max_memory"


def test_host_secret_dirs_are_not_visible(
    isolated_mode: str, workspace: Path, open_box: Callable[..., Sandbox],
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = tmp_path / "home" / "bot"
    for name, text in {".ssh/id_ed25519": "PRIVATE KEY", ".config/gh/hosts.yml": "oauth_token: gho_x",
                       ".docker/config.json": '{"auths": {}}'}.items():
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(text)
    monkeypatch.setenv("HOME", str(home))
    box = open_box(isolated_mode, workspace)
    out = box.run(f"ls -A {home}; cat {home}/.ssh/id_ed25519 {home}/.config/gh/hosts.yml; ls -A /root /home").output
    assert "PRIVATE KEY" not in out and "gho_x" not in out
    assert not {".ssh", ".docker", ".config"} & set(line for line in out.splitlines() if not line.startswith("ls:"))
    assert box.run("cat /root/.ssh/id_rsa /root/.gitconfig /root/.npmrc 2>/dev/null").output == ""
    assert box.run("ls -A /var/run/docker.sock /run/docker.sock 2>/dev/null").output == ""


def test_close_all_ends_a_call_in_flight_and_removes_the_sandbox(sandbox: Sandbox) -> None:
    """What a stopping server does to the sandboxes of jobs it released: the job's thread, blocked in a
    tool call, gets `Cancelled` (not a failure to report) and nothing of the sandbox is left."""
    from bot.core.errors import Cancelled
    from bot.sandbox.client import close_all

    raised: list[BaseException] = []

    def job() -> None:
        try:
            sandbox.run("sleep 60", timeout=90)
        except BaseException as e:  # noqa: BLE001 - the test inspects it
            raised.append(e)

    container = getattr(sandbox._launcher, "container", None)  # type: ignore[attr-defined]  # docker's
    thread = threading.Thread(target=job)
    thread.start()
    time.sleep(1.5)
    began = time.monotonic()
    assert close_all() >= 1
    thread.join(30)
    assert not thread.is_alive() and time.monotonic() - began < 20
    assert len(raised) == 1 and isinstance(raised[0], Cancelled), raised
    with pytest.raises(Cancelled):
        sandbox.run("true")
    if container is not None:
        assert subprocess.run(["docker", "inspect", container], capture_output=True).returncode != 0
