"""`SANDBOX_MODE=docker`: one long-lived container per sandbox, agentd in one `docker exec -i`.

The container (`spec.image`, default `decode-sandbox:latest` built by
`decode image build`, bot/sandbox/images.py) runs `sleep infinity` under `--init` with:
no network but loopback in every phase (`--network none`), memory, cpu and
pids limits, every capability dropped (`--cap-drop ALL`), `no-new-privileges`,
as a non-root user (below), the workspace bind-mounted at /workspace, /tmp
(HOME) and /var/tmp bind-mounted from a private directory beside it (`temp_near`), all three
polled by `disk.DiskGuard` against DECODE_MAX_DISK_MB, the agentd zipapp at /run/decode-egress/agentd.pyz
(copied into the egress proxy's directory below, which is bind-mounted read-only, so the bot can
itself run in a container), and a clean environment (no variable of the host's). Starting one
takes two engine calls (`image inspect`, `run -d`) while the workspace is handed to the sandbox's
uid on a thread; whether the image can run agentd is asked only when agentd fails to start.
It carries the label `decode.sandbox` so leftovers can be found and removed
(`remove_leftovers`, which `prepare_host` runs when a server starts).

Network: the only way out is the launcher's egress proxy (egress.py) on the
host: its private directory is bind-mounted read-only at /run/decode-egress,
agentd relays to the socket in it, and `start(policy)` sets what it lets
through. The directory is made next to the workspace, so that when the bot
itself runs in a container the engine finds it on the same path as the
workspace (deploy.md: the data directory at the same path).

agentd's requests do not go through `docker exec`'s stdin and stdout (the docker
CLI, the engine and the shim: 0.3 ms more per tool call): `start` listens on a
one-use unix socket in that same directory and agentd, started by `docker exec
-i`, connects to it (DECODE_AGENTD_SOCKET, which commands do not inherit). The
socket is removed once agentd connected. A process of the sandbox that connected
first would only stand in for agentd, which the host does not trust either.

Ownership: every command, setup included, runs as a non-root uid without
capabilities, so a hostile command cannot chown, setuid or read past file modes,
and nothing it leaves in the workspace is owned by root. Setup steps that need
root (apt-get install) fail: the image should carry the system packages
(`DECODE_SANDBOX_IMAGE`, or `image:` in .github/decode.yml); user-level installs
work: `pip install` falls back to a user install and `npm install -g` has its
prefix in $HOME/.local, whose bin directory is first on PATH (`local.clean_env`).
Why not root for setup and a non-root `docker exec --user` for the agent: the
capabilities are fixed when the container is created, setup as root could
plant setuid files or root-owned state the agent phase then relies on, and a
compromised dependency installed during setup runs with the same
rights either way. The uid is the workspace owner's when that is not root (a
non-root bot with a rootful engine: files stay the bot's); for a root bot it is
`SANDBOX_UID` (1000), the workspace being chowned to it for the run and back on
close. With rootless Docker, container root already is the unprivileged host
user, so the container keeps uid 0 (still without capabilities). Git inside is
told that /workspace is a safe directory (GIT_CONFIG_* variables).

Setup cache (`Capabilities.setup_cache`, driven by bot/run/setup_cache.py): after a setup
succeeded, `save_setup_cache` commits the container's file system into a local image
(`docker commit`: bind mounts are not in it) and archives, from inside the
sandbox, what setup left in the workspace (untracked and ignored files, as
`git status --porcelain --ignored` lists them) and in HOME (/tmp, a bind mount; its
`.cache` left out). A later run starts from that image and `restore_setup_cache`
unpacks the archive inside its sandbox, as the sandbox's user, after the host has
checked every entry (`setup_cache.archive_problem`).
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import socket
import subprocess
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import ClassVar

from bot.core.errors import ConfigError, SandboxError
from bot.core.trees import remove_tree
from bot.sandbox import docker_pool, warm_pool
from bot.sandbox.docker_engine import check_engine, engine, image_id
from bot.sandbox.docker_host import TEMP_DIRS, chown_tree, egress_near, mount, temp_near
from bot.sandbox.docker_pool import LABEL, remove_leftovers
from bot.sandbox.cgroup import oom_kill_count
from bot.sandbox.client import ProcessTransport
from bot.sandbox.disk import DiskGuard
from bot.sandbox.egress_policy import EgressPolicy
from bot.sandbox.egress_wire import bind_unix
from bot.sandbox.agentd.rpc import CHANNEL_SOCKET
from bot.sandbox.local import clean_env
from bot.sandbox.protocol import Cap, Capabilities, Death, SandboxSpec, memory_cap, out_of_memory, stopped_from_outside
from bot.sandbox.setup_files import Saved, restore_locally, restore_script, save_locally, save_script
from bot.sandbox.shipping import agentd_file

WORKSPACE = "/workspace"
AGENTD_INSIDE = "/run/decode-egress/agentd.pyz"  # in EGRESS_INSIDE, see the module docstring
EGRESS_INSIDE = "/run/decode-egress"
SAFE_DIRECTORY = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": WORKSPACE}
SANDBOX_UID = 1000  # the agent's uid when the workspace's owner is root
SETTLE_S = 3.0  # how long a container whose agentd is gone may take to be seen stopped
OOM_FILES = ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control")  # cgroup v2, v1
log = logging.getLogger(__name__)
PROBE = ("import os, sys, json, select, subprocess, base64, tempfile, shutil, fnmatch\n"
         "assert sys.version_info >= (3, 8), sys.version\n"
         "st = os.stat(%r); print(st.st_uid, st.st_gid)" % WORKSPACE)


class DockerLauncher:
    """Runs one container per sandbox and agentd in it through a persistent `docker exec -i`."""

    capabilities: ClassVar[Capabilities] = Capabilities(
        isolating=True, egress_policy=True, image=True, gpu=False, pool=True, setup_cache=True)
    root = WORKSPACE

    @classmethod
    def prepare_host(cls, spec: SandboxSpec) -> None:
        """Remove the containers and pool slots a crashed predecessor on this host left, then, with
        `spec.pool_size` (DECODE_POOL_SIZE), start filling the warm pool for sandboxes like `spec`'s."""
        if removed := remove_leftovers():
            log.info("removed %d sandbox containers left by dead processes", len(removed))
        if spec.pool_dir is not None:
            docker_pool.remove_stale_slots(spec.pool_dir)
            if spec.pool_size:
                cls.pool(spec, pinned=True)

    @classmethod
    def preflight(cls) -> None:
        """The Docker engine answers (`check_engine`), before any clone or job: down, it is a setting or a
        service to fix (exit 2), as `decode check` says; the image is checked when the sandbox starts."""
        check_engine()

    @classmethod
    def pool(cls, spec: SandboxSpec, *, docker: str = "docker", client_env: Mapping[str, str] | None = None,
             pinned: bool = False) -> warm_pool.WarmPool:
        """The process-wide warm pool of `spec.pool_size` containers like `spec`'s (its workspace does not
        matter), filling. A pool is made per image on first use: a setup cache entry's image gets its own."""
        return docker_pool.pool_of(cls, spec, *engine(docker, client_env), pinned=pinned)

    def __init__(self, spec: SandboxSpec, *, docker: str = "docker",
                 client_env: Mapping[str, str] | None = None) -> None:
        """Claim a warm container for `spec` (with `spec.pool_size` and `spec.pool_dir`), else create and start
        one; raises when the engine, image or python3 is missing."""
        self._docker, self._env = engine(docker, client_env)
        self._spec = spec
        self._owner: tuple[int, int] | None = None  # the workspace's owner, when chowned for the run
        self.container: str | None = None
        self.disk: DiskGuard | None = None
        self.temp: Path | None = None  # the host directory of /tmp and /var/tmp (none: size-limited tmpfs mounts)
        self.slot: Path | None = None  # a claimed warm container's slot, removed on close
        self._ready: ProcessTransport | None = None  # the warm container's agentd, for the first `start`
        self._oom_kills = 0  # out-of-memory kills in the container already told (`death`)
        self._memory: Cap | None = None  # the memory cap, once an out-of-memory kill stopped the sandbox
        self._agentd: ProcessTransport | None = None  # the running agentd's `docker exec`, for `death`
        pooled = spec.pool_size and spec.pool_dir is not None and not spec.hand_back_only  # a pooled one polls
        warm = self.pool(spec, docker=self._docker, client_env=self._env).claim() if pooled else None
        self.acquired_from = "cold" if warm is None else "pool"
        if warm is not None:
            self._adopt(warm)
            return
        image_id(spec.image, self._docker, self._env)
        self.egress = egress_near(spec.workspace.resolve())
        try:
            self.user = self._user(spec.workspace.resolve())
            shutil.copyfile(agentd_file(), self.egress.directory / Path(AGENTD_INSIDE).name)
            self._give(self.egress.directory, self.egress.path)  # the 0700 proxy directory
            if not spec.hand_back_only:
                self.temp = temp_near(spec.workspace.resolve())
                self._give(*(self.temp / name for name in TEMP_DIRS))
            with ThreadPoolExecutor(1) as pool:  # the workspace's files to its uid while the engine starts it
                handed = pool.submit(self._hand_workspace, spec.workspace.resolve())
                try:
                    self.container = self._create(spec)
                finally:
                    handed.result()
            self.disk = DiskGuard.of((spec.workspace.resolve(), *filter(None, [self.temp])), spec, self._kill_all)
        except BaseException:
            self.close()
            raise

    def _adopt(self, warm: docker_pool.WarmContainer) -> None:
        """Take over a claimed warm container: its container, proxy, disk guard and running agentd, with the
        run's workspace moved into its slot and, like a cold start's (`_user`), given to the sandbox's uid when
        that is not its owner's (a root bot: SANDBOX_UID; a rootless engine maps root to the owner)."""
        inner = warm.launcher
        self.container, self.egress, self.user, self.disk = inner.container, inner.egress, inner.user, inner.disk
        self.temp = inner.temp
        self.slot, self._ready = warm.slot, warm.transport
        workspace, target = self._spec.workspace.resolve(), warm.slot / "workspace"
        try:
            if self._spec.ready is not None:
                self._spec.ready()
            st = workspace.stat()
            docker_pool.move_into(workspace, target)
            if self.user != (0, 0) and (st.st_uid, st.st_gid) != self.user:
                self._owner = (st.st_uid, st.st_gid)
                chown_tree(target, *self.user)
        except BaseException:
            self.close()
            raise

    def _cli(self, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run([self._docker, *args], env=self._env, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            raise SandboxError(f"docker {args[0]} did not answer in {timeout:.0f}s: is the engine healthy?") from None

    def _user(self, workspace: Path) -> tuple[int, int]:
        """The uid:gid commands run as: the workspace owner's, or `SANDBOX_UID` (the workspace to be handed to
        it by `_hand_workspace`)."""
        if not workspace.is_dir():
            raise ConfigError(f"the workspace {workspace} does not exist")
        st = workspace.stat()
        if "rootless" in self._cli("info", "--format", "{{.SecurityOptions}}").stdout:
            return (0, 0)  # container root is the unprivileged host user
        if st.st_uid != 0:
            return (st.st_uid, st.st_gid)
        self._owner = (st.st_uid, st.st_gid)
        return (SANDBOX_UID, SANDBOX_UID)

    def _give(self, *paths: Path) -> None:
        """chown `paths` to the sandbox's uid when that is not the bot's (a rootless engine's root, (0, 0), is the
        bot's user on the host: nothing to hand over, and a chown to 0 would be refused)."""
        if self.user != (0, 0) and self.user[0] != os.getuid():
            for path in paths:
                os.chown(path, *self.user)

    def _hand_workspace(self, workspace: Path) -> None:
        """Once its files are in place (`spec.ready`), chown the workspace to the sandbox's uid when `_user`
        chose `SANDBOX_UID` for a root-owned one."""
        if self._spec.ready is not None:
            self._spec.ready()
        if self._owner is not None:
            chown_tree(workspace, SANDBOX_UID, SANDBOX_UID)

    def _create(self, spec: SandboxSpec) -> str:
        workspace = spec.workspace.resolve()
        env = clean_env("/tmp", "docker") | SAFE_DIRECTORY
        env["DECODE_EGRESS_SOCKET"] = f"{EGRESS_INSIDE}/{self.egress.path.name}"
        name = "decode-%s-%s" % ("".join(c if c.isalnum() or c in "_.-" else "_" for c in spec.name)[:40],
                                 secrets.token_hex(4))
        args = ["run", "--detach", "--init", "--name", name, "--hostname", "decode-sandbox",
                "--label", f"{LABEL}={spec.name}", "--label", f"{LABEL}.pid={os.getpid()}",
                "--label", f"{LABEL}.host={socket.gethostname()}",
                "--network", "none", "--memory", f"{spec.memory_mb}m", "--memory-swap", f"{spec.memory_mb}m",
                "--cpus", str(min(spec.cpus, os.cpu_count() or 1)), "--pids-limit", str(spec.pids),
                "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--user", "%d:%d" % self.user,
                *self._temp_mounts(spec), "--mount", mount(workspace, WORKSPACE),
                "--mount", mount(self.egress.directory, EGRESS_INSIDE, readonly=True), "--workdir", WORKSPACE]
        for key, value in env.items():
            args += ["--env", f"{key}={value}"]
        res = self._cli(*args, spec.image, "sleep", "infinity")
        if res.returncode != 0:
            self._cli("rm", "-f", "-v", name)
            raise SandboxError(f"could not start a container from {spec.image}: {res.stderr.strip()}",
                               stderr=res.stderr)
        return res.stdout.strip().splitlines()[-1] if res.stdout.strip() else name

    def _temp_mounts(self, spec: SandboxSpec) -> list[str]:
        """/tmp and /var/tmp: from `self.temp`, where the disk guard sees them (a tmpfs is charged to the memory
        cap and ends in ENOSPC, not the disk cap), else (the hand-back: its patch is staged in /tmp, no guard
        polls) tmpfs mounts as large as the memory cap."""
        if self.temp is None:
            return [arg for inside in TEMP_DIRS.values() for arg in
                    ("--tmpfs", f"{inside}:rw,exec,nosuid,nodev,mode=1777,size={spec.memory_mb}m")]
        return [arg for name, inside in TEMP_DIRS.items() for arg in ("--mount", mount(self.temp / name, inside))]

    def _probe(self, image: str) -> None:
        """Raise `ConfigError` when `image` cannot run agentd (no python3 3.8+): asked once agentd failed."""
        assert self.container is not None
        res = self._cli("exec", self.container, "python3", "-I", "-c", PROBE)
        if res.returncode != 0:
            raise ConfigError(
                f"DECODE_SANDBOX_IMAGE={image} cannot run agentd: it needs python3 (3.8+) with its standard "
                f"library on PATH; build one with `decode image build IMAGE` ({res.stderr.strip()[-300:]})"
            )

    def _kill_all(self) -> None:
        """Kill every process of the sandbox's user but the container's init (the disk cap)."""
        if self.container is not None:
            self._cli("exec", self.container, "kill", "-KILL", "-1")

    def _live(self) -> str:
        """The container's id; `SandboxError` once it has been removed."""
        if self.container is None:
            raise SandboxError("the sandbox container has been removed")
        return self.container

    def start(self, policy: EgressPolicy) -> ProcessTransport:
        """Let the egress proxy apply `policy`, then exec agentd in the container."""
        container = self._live()
        if self.disk is not None:
            self.disk.check()
        self.egress.policy = policy
        if self._ready is not None:  # a warm container's agentd: its egress is the proxy's, just set
            self._agentd, self._ready = self._ready, None
            return self._agentd
        path = self.egress.directory / f"agentd-{secrets.token_hex(4)}.sock"
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            try:
                bind_unix(listener, path)
                self._give(path)
                listener.listen(1)
            except OSError as e:
                listener.close()
                raise SandboxError(f"cannot make agentd's socket in {self.egress.directory}: {e}") from None
            argv = [self._docker, "exec", "-i", "--env", f"{CHANNEL_SOCKET}={EGRESS_INSIDE}/{path.name}",
                    container, "python3", "-I", AGENTD_INSIDE, WORKSPACE]
            try:
                self._agentd = ProcessTransport(argv, self._env, listener)
            except SandboxError:
                self._probe(self._spec.image)  # the clearer error when the image is the cause
                raise
            return self._agentd
        finally:
            path.unlink(missing_ok=True)

    @classmethod
    def setup_cache_base(cls, image: str) -> str:
        """The id of `image` on the engine: what a setup cache entry made from it is keyed on."""
        return image_id(image)

    @classmethod
    def drop_setup_cache(cls, tag: str) -> bool:
        """Remove the image `tag` of a setup cache entry; False while a container still uses it."""
        res = subprocess.run(["docker", "image", "rm", tag], capture_output=True, text=True, timeout=120)
        return res.returncode == 0 or "no such image" in res.stderr.lower()

    def save_setup_cache(self, tag: str, archive: Path, cap_bytes: int) -> Saved:
        """Commit the container into the image `tag` and write setup's workspace and HOME files to `archive`
        (a tar with `workspace/` and `home/` entries); returns the bytes both take, and `tag`. Raises `SandboxError`
        when either fails or the two pass `cap_bytes`; the caller then keeps nothing."""
        committed = self._cli("commit", "--pause", self._live(), tag, timeout=600)
        if committed.returncode != 0:
            raise SandboxError(f"docker commit failed: {committed.stderr.strip()[-300:]}")
        sizes = [self._cli("image", "inspect", "--format", "{{.Size}}", name).stdout.strip()
                 for name in (tag, self._spec.image)]
        used = max(0, int(sizes[0] or 0) - int(sizes[1] or 0))
        argv = [self._docker, "exec", self._live(), "python3", "-I", "-c", save_script(WORKSPACE)]
        used = save_locally(argv, self._env, archive, used, cap_bytes)
        return Saved(used, tag)

    def restore_setup_cache(self, archive: Path) -> None:
        """Unpack a checked setup cache archive into the workspace and HOME, inside the sandbox as its user."""
        restore_locally([self._docker, "exec", "-i", self._live(), "python3", "-I", "-c", restore_script(WORKSPACE)],
                        self._env, archive)

    def death(self) -> Death:
        """The engine's word: a new out-of-memory kill (the cgroup's count read inside, a stopped container's
        `State.OOMKilled`: the memory cap), else how it stopped (a gone agentd's: within `SETTLE_S`)."""
        deadline = time.monotonic() + SETTLE_S
        while (state := self._state()) and state[0] == "true":
            if self._new_oom_kill():
                return self._out_of_memory()
            if self._agentd is None or not self._agentd.ended or time.monotonic() > deadline:
                return Death("a process was killed in the running container")
            time.sleep(0.1)
        if not state:
            return Death("the sandbox container was removed")
        _, oom_killed, code = state
        if oom_killed == "true" and not self._oom_kills:
            self._oom_kills = 1
            return self._out_of_memory()
        return stopped_from_outside(int(code) if code.lstrip("-").isdigit() else None, "the container")

    def _out_of_memory(self) -> Death:
        """An out-of-memory kill, told: the memory cap stops the agent's sandbox (not one that only hands back)."""
        if self._memory is None and not self._spec.hand_back_only:
            self._memory = memory_cap(self._spec.memory_mb)
            self._kill_all()
        return out_of_memory(self._spec.memory_mb)

    def _state(self) -> list[str]:
        """The container's `State.Running`, `State.OOMKilled` and `State.ExitCode`; [] when it is gone."""
        state = self._cli("inspect", "--format", "{{.State.Running}} {{.State.OOMKilled}} {{.State.ExitCode}}",
                          self.container or "").stdout.split()
        return state if len(state) == 3 else []

    def _new_oom_kill(self) -> bool:
        """Whether the container's cgroup counts more out-of-memory kills than were told."""
        counted = self._cli("exec", self.container or "", "cat", *OOM_FILES).stdout
        kills = oom_kill_count(counted)
        told, self._oom_kills = self._oom_kills, max(kills, self._oom_kills)
        return kills > told

    def stopped(self, now: bool = False, disk: bool = True) -> Cap | None:
        """The disk cap, or the memory cap once an out-of-memory kill was seen; `now`: measured first (`disk` too)."""
        if now and self.container is not None and self._new_oom_kill():
            self._out_of_memory()
        return (self.disk and (self.disk.measure() if now and disk else self.disk.exceeded)) or self._memory

    def blocked(self) -> dict[str, int]:
        """What the egress proxy refused since the policy was last set ("host:port" -> attempts)."""
        return self.egress.blocked()

    def close(self) -> None:
        """Give the workspace back to its owner, remove the container and stop the egress proxy.
        Safe to call twice."""
        if self.disk is not None:
            self.disk.close()
        if self.container is not None:
            self._cli("rm", "-f", "-v", self.container)
            self.container = None
        if self.temp is not None:
            remove_tree(self.temp)
            self.temp = None
        if self.slot is not None:  # the workspace outlives its sandbox: a restart opens a new one on it
            try:
                docker_pool.move_into(self.slot / "workspace", self._spec.workspace.resolve())
            except SandboxError as e:
                log.warning("%s", e)
        if self._owner is not None:
            chown_tree(self._spec.workspace.resolve(), *self._owner)
            self._owner = None
        if self._ready is not None:
            self._ready.close()
            self._ready = None
        self.egress.close()
        if self.slot is not None:
            docker_pool.remove_slot(self.slot)
            self.slot = None
