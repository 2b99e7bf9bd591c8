"""What only the modal backend does, against tests/fakes/modal_double.py.

Here the sandbox's /workspace is private (no `share_workspace`): the workspace
really travels as a tar and the changes come back as a patch.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import threading
import time
import types
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import pytest

from bot.config import Settings
from bot.core.errors import ConfigError, SandboxError
from bot.sandbox import EgressPolicy, SandboxSpec, open_sandbox, prepare_host
from bot.sandbox import warm_pool
from bot.sandbox import Refused
from bot.sandbox.protocol import ANSWER_CAP, SandboxDied
from bot.sandbox.client import AgentdSandbox
from bot.sandbox.modal import AGENTD_INSIDE, ENV, ModalLauncher, load_client, network_options, prewarm, use_client
from tests.conftest import git
from tests.fakes import modal_double
from tests.sandbox.conftest import require


@pytest.fixture(autouse=True)
def double(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    require("modal")
    before = len(modal_double.created)
    yield
    warm_pool.close_all()
    leaked = [s.object_id for s in modal_double.created[before:] if s.poll() is None]
    assert leaked == [], "every sandbox is terminated at the end"


MB = 1024 * 1024


def spec(workspace: Path, **fields: Any) -> SandboxSpec:
    return SandboxSpec(workspace=workspace, memory_mb=512, cpus=1.0, name="test-modal", **fields)


@pytest.fixture
def box(workspace: Path) -> Iterator[AgentdSandbox]:
    sandbox = open_sandbox("modal", spec(workspace))
    assert isinstance(sandbox, AgentdSandbox)
    yield sandbox
    sandbox.close()


def launcher_of(box: AgentdSandbox) -> ModalLauncher:
    launcher = box._launcher
    assert isinstance(launcher, ModalLauncher)
    return launcher


def test_the_workspace_is_uploaded_and_changes_come_back_as_a_patch(
    box: AgentdSandbox, workspace: Path, tmp_path: Path
) -> None:
    base = git(workspace, "rev-parse", "HEAD")
    assert box.run("git rev-parse HEAD").output.strip() == base, "the .git came along"
    assert box.read_file("src/app.py") == b"def main():\n    return 1\n"
    box.write_file("src/app.py", b"def main():\n    return 42\n")
    box.run("echo new > added.txt && rm docs/old.txt")
    assert (workspace / "src/app.py").read_text() == "def main():\n    return 1\n", "the host copy is untouched"
    assert not (workspace / "added.txt").exists()
    patch = box.export_patch(base)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(workspace), str(clone)], check=True)
    subprocess.run(["git", "apply", "--index", "-"], input=patch, cwd=clone, check=True)
    assert (clone / "src/app.py").read_text() == "def main():\n    return 42\n"
    assert (clone / "added.txt").read_text() == "new\n" and not (clone / "docs/old.txt").exists()


def test_requests_larger_than_modals_stdin_buffer_get_through(box: AgentdSandbox) -> None:
    big = bytes(range(256)) * (5 * 4096)  # 5 MiB, 6.7 MiB as base64 in one JSON line
    box.write_file("big.bin", big)
    assert box.read_file("big.bin") == big


def test_network_switch_goes_through_a_snapshot_and_keeps_setup_files(workspace: Path) -> None:
    box = open_sandbox("modal", spec(workspace), network=EgressPolicy(internet=True))
    try:
        launcher = launcher_of(box)
        first = launcher.sandbox
        assert not first.block_network
        box.run("mkdir -p /root/.cache/tool && echo installed > /root/.cache/tool/x && echo built > build.txt")
        box.set_network(EgressPolicy())
        second = launcher.sandbox
        assert second is not first and second.block_network
        assert first.poll() is not None, "the old sandbox is terminated"
        assert box.run("cat /root/.cache/tool/x build.txt").output == "installed\nbuilt\n"
        assert box.run("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '").output.split() == ["lo"]
    finally:
        box.close()


def test_a_dead_sandbox_is_named_by_modal_and_not_replaced_behind_the_run(box: AgentdSandbox) -> None:
    launcher = launcher_of(box)
    dead = launcher.sandbox
    modal_double.kill(dead)
    with pytest.raises(SandboxDied, match=r"^the sandbox died: the Modal sandbox was stopped from outside "
                                          r"\(exit status 137 / signal 9\)$"):
        box.run("echo hello")
    assert launcher.sandbox is dead, "the run (bot/run/restart.py) opens the next sandbox, not the launcher"


def test_a_sandbox_stopped_just_after_agentds_stream_ended_is_named_stopped_not_agentd(box: AgentdSandbox) -> None:
    """Modal's state can lag the exec stream: agentd's output ends first, the sandbox shows as stopped a moment
    later (as when the platform SIGKILLs every process in it). The reason given is the sandbox's, not agentd's."""
    launcher = launcher_of(box)
    later = threading.Timer(0.5, modal_double.kill, [launcher.sandbox])
    later.start()
    try:
        with pytest.raises(SandboxDied, match=r"^the sandbox died: the Modal sandbox was stopped from outside "
                                              r"\(exit status 137 / signal 9\)$"):
            box.run("kill -9 $PPID")  # agentd, the command's parent, ends first
    finally:
        later.cancel()


def test_agentd_ending_in_a_sandbox_that_runs_on_is_named_with_what_agentd_said(box: AgentdSandbox) -> None:
    with pytest.raises(SandboxDied, match=r"^the sandbox died: agentd ended in the running Modal sandbox: \S"):
        box.run("kill -9 $PPID")
    assert launcher_of(box).sandbox.poll() is None, "the sandbox itself was left running"


def test_a_new_sandbox_gets_the_checkpointed_changes_back(workspace: Path, box: AgentdSandbox) -> None:
    base = git(workspace, "rev-parse", "HEAD")
    box.write_file("notes.txt", b"kept\n")
    box.run("printf '# demo, edited\\n' > README.md && mkdir -p bin && head -c 300 /dev/urandom > bin/blob")
    checkpoint = box.hand_back(base)
    blob = box.read_file("bin/blob")
    modal_double.kill(launcher_of(box).sandbox)
    again = open_sandbox("modal", spec(workspace))
    try:
        launcher_of(again).restore_changes(checkpoint.patch)
        assert again.read_file("notes.txt") == b"kept\n" and again.read_file("README.md") == b"# demo, edited\n"
        assert again.read_file("bin/blob") == blob, "binary files come back too"
        assert again.hand_back(base).patch == checkpoint.patch
    finally:
        again.close()


class _Altered(modal_double.Sandbox):
    """The double's sandbox, created as a subclass that changes what it does."""

    @classmethod
    def create(cls, *args: str, **options: Any) -> "modal_double.Sandbox":
        sandbox = modal_double.Sandbox.create(*args, **options)
        sandbox.__class__ = cls
        return sandbox


class _NoAgentd(_Altered):
    """A sandbox whose image cannot run python3: agentd's exec fails after the sandbox exists."""

    def exec(self, *args: str, **options: Any) -> Any:
        if args[0] == "python3":
            raise RuntimeError("python3: not found")
        return super().exec(*args, **options)


def test_close_terminates_even_when_start_fails(workspace: Path) -> None:
    client = types.SimpleNamespace(App=modal_double.App, Image=modal_double.Image, Sandbox=_NoAgentd)
    before = len(modal_double.created)
    with pytest.raises(SandboxError, match="could not start agentd"):
        AgentdSandbox(ModalLauncher(spec(workspace), client=client), mode="modal")
    made = modal_double.created[before:]
    assert made and all(s.poll() is not None for s in made)


class _Injected(_Altered):
    """A sandbox in which something besides agentd writes to agentd's stdout (on Modal, commands run as root, which
    can): after agentd's first answer (to the ping), `LINES`, then agentd's own output again."""

    LINES: ClassVar[list[bytes]] = []

    def exec(self, *args: str, **options: Any) -> Any:
        process = super().exec(*args, **options)
        if args[:3] == ("python3", "-I", AGENTD_INSIDE):
            process.stdout = self._inject(process.stdout)
        return process

    def _inject(self, stdout: Any) -> Iterator[bytes]:
        chunks = iter(stdout)
        for chunk in chunks:
            yield chunk
            if b"\n" in chunk:
                break
        yield from self.LINES
        yield from chunks


class _Flooded(_Injected):
    LINES = [b"x" * MB] * (ANSWER_CAP // MB + 40) + [b"\n"]


class _Forged(_Injected):
    LINES = [b'{"id": 2, "ok": true}\n']  # the next call's id, but none of what an exec answer carries


@pytest.mark.parametrize("sandbox, death", [
    (_Flooded, "agentd sent a line of more than 256 MB, more than any answer of its; the host stopped reading it"),
    (_Forged, "agentd's channel carried an answer to exec that lacks what agentd's own answers carry"),
])
def test_a_line_that_is_not_agentds_answer_ends_the_sandbox(workspace: Path, sandbox: type, death: str) -> None:
    client = types.SimpleNamespace(App=modal_double.App, Image=modal_double.Image, Sandbox=sandbox)
    box = AgentdSandbox(ModalLauncher(spec(workspace), client=client), mode="modal")
    try:
        with pytest.raises(SandboxDied) as raised:
            box.run("echo hello")
        assert str(raised.value) == f"the sandbox died: {death}"
    finally:
        box.close()


def test_close_terminates_after_failed_commands(box: AgentdSandbox) -> None:
    sandbox = launcher_of(box).sandbox
    assert box.run("exit 7").exit_code == 7
    with pytest.raises(Refused):
        box.read_file("missing")
    box.close()
    box.close()
    assert sandbox.poll() is not None


def test_init_failure_is_an_error_that_says_what_to_fix(workspace: Path) -> None:
    class Down:
        @staticmethod
        def lookup(name: str, *, create_if_missing: bool = False) -> Any:
            raise ConnectionError("modal.com unreachable")

    client = types.SimpleNamespace(App=Down, Image=modal_double.Image, Sandbox=modal_double.Sandbox)
    with pytest.raises(SandboxError, match="modal token"):
        ModalLauncher(spec(workspace), client=client)


def test_resources_gpu_and_allowlist_reach_sandbox_create(workspace: Path) -> None:
    box = open_sandbox("modal", spec(workspace, gpu="H200:4", lifetime_s=600),
                       network=EgressPolicy(allow_cidrs=("10.1.0.0/16",)))
    try:
        sandbox = launcher_of(box).sandbox
        assert (sandbox.gpu, sandbox.cpu, sandbox.memory) == ("H200:4", 1.0, 512)
        assert sandbox.outbound_cidr_allowlist == ["10.1.0.0/16"]
        assert sandbox.image.packages == ("git",)
    finally:
        box.close()


@pytest.mark.parametrize("policy, options", [
    (EgressPolicy(), {"block_network": True}),
    (EgressPolicy(internet=True), {}),  # Modal's default: any public address
    (EgressPolicy(internet=True, allow_cidrs=("10.1.0.0/16",)), {}),
    (EgressPolicy(allow_cidrs=("10.1.0.0/16",)), {"outbound_cidr_allowlist": ["10.1.0.0/16"]}),
    (EgressPolicy(allow_domains=("*.packages.example.com",)),
     {"outbound_domain_allowlist": ["*.packages.example.com"]}),
    (EgressPolicy(internet=True, allow_domains=("packages.example.com",), allow_cidrs=("10.1.0.0/16",)),
     {"outbound_domain_allowlist": ["packages.example.com"], "outbound_cidr_allowlist": ["10.1.0.0/16"]}),
])
def test_each_policy_maps_to_modals_own_controls(policy: EgressPolicy, options: dict[str, Any]) -> None:
    assert network_options(policy) == options


def test_the_agent_policy_reaches_sandbox_create_and_nothing_is_reported_blocked(workspace: Path) -> None:
    box = open_sandbox("modal", spec(workspace), network=EgressPolicy(internet=True))
    try:
        first = launcher_of(box).sandbox
        box.set_network(EgressPolicy(internet=True, allow_cidrs=("10.1.0.0/16",)))
        assert launcher_of(box).sandbox is first, "the same controls on Modal: no snapshot, no new sandbox"
        box.set_network(EgressPolicy(allow_domains=("*.packages.example.com",), allow_cidrs=("10.1.0.0/16",)))
        sandbox = launcher_of(box).sandbox
        assert sandbox is not first and first.poll() is not None
        assert sandbox.outbound_domain_allowlist == ["*.packages.example.com"]
        assert sandbox.outbound_cidr_allowlist == ["10.1.0.0/16"]
        assert box.blocked() == {}, "Modal enforces the policy itself and reports nothing back"
    finally:
        box.close()


def test_no_host_variable_is_given_to_modal(box: AgentdSandbox) -> None:
    sandbox = launcher_of(box).sandbox
    assert sandbox.env == ENV
    assert sandbox.env["DECODE_SANDBOX"] == "modal"
    assert "ANTHROPIC_API_KEY" not in box.run("env").output


def test_client_and_pool_size_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_client() is modal_double, "the session's tests talk to the double (tests/conftest.py)"
    use_client(None)
    try:
        import modal

        assert load_client() is modal, "without an injected client, the modal package"
        monkeypatch.setitem(sys.modules, "modal", None)  # as if the modal package were not installed
        with pytest.raises(ConfigError, match=r"^SANDBOX_MODE=modal needs modal, which is not installed: "
                                              r"pip install 'decode-bot\[modal\] @ git\+https://github.com/decode-bot/decode-bot'$"):
            load_client()
    finally:
        use_client(modal_double)
    assert Settings.from_env({"DECODE_POOL_SIZE": "3"}).sandbox.pool_size == 3
    assert Settings.from_env({}).sandbox.pool_size == 0
    with pytest.raises(ConfigError, match="DECODE_POOL_SIZE"):
        Settings.from_env({"DECODE_POOL_SIZE": "many"})


def _acquire_seconds(workspace: Path, pool: int) -> tuple[str, float]:
    launcher = ModalLauncher(spec(workspace), client=modal_double, pool=pool)
    try:
        warm = prewarm(spec(workspace), client=modal_double, size=pool) if pool else None
        if warm is not None:
            assert warm.wait_full(30), warm.last_error
        box = AgentdSandbox(launcher, mode="modal")
        assert box.run("cat README.md").output == "# demo\n", "a claimed sandbox is made repo-specific"
        box.close()
        return launcher.acquired_from, launcher.acquire_s
    finally:
        launcher.close()


def test_a_pool_claim_is_faster_than_a_cold_create(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cold = [_acquire_seconds(workspace, 0) for _ in range(5)]
    warm = [_acquire_seconds(workspace, 2) for _ in range(5)]
    assert {how for how, _ in cold} == {"cold"} and {how for how, _ in warm} == {"pool"}, (cold, warm)
    cold_s = statistics.median(s for _, s in cold)
    warm_s = statistics.median(s for _, s in warm)
    with capsys.disabled():
        print(f"\nmodal double: cold create {cold_s * 1000:.1f} ms, pool claim {warm_s * 1000:.2f} ms (medians of 5)")
    assert warm_s < cold_s


def test_pooled_sandboxes_are_terminated_at_exit(workspace: Path) -> None:
    launcher = ModalLauncher(spec(workspace), client=modal_double, pool=2)
    try:
        launcher.start(EgressPolicy()).close()
        pool = launcher.pool(EgressPolicy())
        assert pool is not None and pool.wait_full(30)
        waiting = [s for _, s in pool._ready]
    finally:
        launcher.close()
    warm_pool.close_all()
    assert all(s.poll() is not None for s in waiting)


def test_host_start_up_fills_the_pool_only_with_a_pool_size(workspace: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    before = len(modal_double.created)
    prepare_host("modal", spec(workspace))
    assert len(modal_double.created) == before, "DECODE_POOL_SIZE=0: no sandbox before the first job"
    prepare_host("modal", replace(spec(workspace), pool_size=1))
    deadline = time.monotonic() + 30
    while len(modal_double.created) == before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(modal_double.created) == before + 1, "one warm sandbox waits for the first job"
