"""`SANDBOX_MODE=bwrap`: agentd inside bubblewrap namespaces, on the host's own root.

What the sandboxed process sees:
- the host's top-level directories bound read-only, a fresh /dev and /proc (own
  pid namespace: no host process is visible), and a /tmp that is a fresh,
  per-sandbox host directory (HOME=/tmp) removed on close - a directory rather
  than a tmpfs so that what a setup step installs under HOME survives
  `set_network`, which restarts bwrap;
- the workspace read-write at `/workspace`, the working directory;
- empty tmpfs over the places where a host keeps secrets: /root, /home, the
  bot user's $HOME, /run (the Docker socket), /var/tmp, /var/lib/docker,
  /var/lib/containerd, /etc/ssh, /mnt, /media, /srv, the directory holding the
  workspace (sibling jobs' workspaces) and every path in `hide` (the decode data
  dir); /etc/shadow and /etc/gshadow cannot be opened. The host Python's prefix is
  bound back read-only when it lives under one of them, so agentd runs with the
  host's `sys.executable`;
- a network namespace of its own with loopback only, in every phase: what it may
  reach goes through the egress proxy (egress.py), whose socket is bound in
  read-only at /run/decode-egress; no variable of the
  host's environment (`--clearenv`, and bwrap itself starts with the clean env so
  /proc/1/environ is clean too), no capabilities (`--cap-drop ALL`: root on the
  host is uid 0 without capabilities inside); PATH is $HOME/.local/bin (where
  setup's pip and npm installs land, see `local.clean_env`), then the host PATH
  entries in `spec.path` that the sandbox can see (an Actions runner's
  toolchains under /opt/hostedtoolcache), then the system directories; never
  decode-bot's virtualenv.

Limits: the bwrap process is put into a fresh cgroup (v1 pids+memory+cpu, or v2)
created per sandbox and removed on close, so memory, pids and cpu are capped for
the whole tree. The cgroup is made in `spec.cgroup_parent` when set (a cgroup v2
directory delegated to the bot's user, DECODE_CGROUP_PARENT; action.yml makes
one on a runner), else under the hierarchy root (root only). Without a usable
cgroup the launcher refuses to start: rlimits would cap each process, not the
sandbox (three processes took 5.4 GiB under a 4 GiB RLIMIT_AS). What the agent
writes (workspace and /tmp) is capped by `disk.DiskGuard`. Passing the memory limit is a cap like the disk:
the same guard reads the cgroup's out-of-memory count at every poll (and when asked, `stopped(now=True)`),
and once it counts a kill every process of the sandbox is killed and `stopped` says so.

Setup cache (`Capabilities.setup_cache`, driven by bot/run/setup_cache.py): the host's root is read-only and
/run and the hidden paths are fresh tmpfs at every start (`set_network` restarts bwrap), so what setup can
leave is in the workspace and HOME (/tmp), and the archive of both (bot/sandbox/setup_files.py) is the whole
"layer": `save_setup_cache` makes it and `restore_setup_cache` unpacks it, each inside a sandbox like the
agent's, as its user. There is no image to key on, so the key's base is `toolchain_digest`: the machine,
the harness's Python (agentd's interpreter), /etc/os-release, the system package database (dpkg, rpm or
apk: an upgraded compiler or library misses) and, for every directory on the sandbox's PATH (the runner's
toolchains in `spec.path` included), each entry's link target, size and mtime (a tool replaced in place
misses). Reading files rather than running `tool --version` keeps it fast and runs nothing of the host's.

Caveat for a root host: uid 0 without capabilities can still read root-owned
files whose owner bits allow it; everything listed above is hidden, but use the
docker backend on a host that keeps other secrets in root-owned files.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import ClassVar

from bot.core.errors import ConfigError
from bot.core.trees import remove_tree
from bot.sandbox.cgroup import SandboxCgroup
from bot.sandbox.client import ProcessTransport
from bot.sandbox.disk import DiskGuard
from bot.sandbox.egress import EgressProxy
from bot.sandbox.egress_policy import EgressPolicy
from bot.sandbox.local import SAFE_PATH, clean_env, harness_bin
from bot.sandbox.protocol import Cap, Capabilities, Death, SandboxSpec, out_of_memory, stopped_from_outside
from bot.sandbox.setup_files import Saved, restore_locally, restore_script, save_locally, save_script
from bot.sandbox.shipping import agentd_file

WORKSPACE = "/workspace"
SAFE_DIRECTORY = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": WORKSPACE}
AGENTD_INSIDE = "/run/decode/agentd.pyz"
EGRESS_INSIDE = "/run/decode-egress"
SECRET_DIRS = (
    "/root", "/home", "/run", "/var/run", "/var/tmp", "/var/lib/docker", "/var/lib/containerd",
    "/etc/ssh", "/mnt", "/media", "/srv",
)
SECRET_FILES = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-")
OWN_MOUNTS = ("/proc", "/dev", "/tmp", "/run", WORKSPACE)
FRESH = ("/tmp", "/run")  # masked already: a per-sandbox directory and a tmpfs
PACKAGE_DBS = ("/var/lib/dpkg/status", "/var/lib/rpm/rpmdb.sqlite", "/var/lib/rpm/Packages", "/lib/apk/db/installed")


class BwrapLauncher:
    """Starts agentd under bubblewrap with the host root read-only and its secrets hidden."""

    capabilities: ClassVar[Capabilities] = Capabilities(
        isolating=True, egress_policy=True, image=False, gpu=False, pool=False, setup_cache=True)
    root = WORKSPACE

    @classmethod
    def prepare_host(cls, spec: SandboxSpec) -> None:
        """Nothing to prepare: a sandbox dies with its process (`--die-with-parent`)."""

    @classmethod
    def preflight(cls) -> None:
        """Nothing to check before the sandbox starts (bubblewrap and the cgroup are checked then)."""

    def __init__(self, spec: SandboxSpec, *, hide: Iterable[Path] = ()) -> None:
        """Prepare the sandbox for `spec`; `hide` adds host paths to mask. Refuses without a usable cgroup."""
        found = shutil.which("bwrap")
        if found is None:
            raise ConfigError("SANDBOX_MODE=bwrap needs bubblewrap: install it (apt-get install bubblewrap)")
        self._bwrap = found
        self._spec = spec
        self._workspace = spec.workspace.resolve()
        if not self._workspace.is_dir():
            raise ConfigError(f"the workspace {self._workspace} does not exist")
        extra = [*hide, *spec.hide]
        self._hidden = hidden_paths(self._workspace, [Path(p) for p in extra])
        self._tmp = Path(tempfile.mkdtemp(prefix="decode-bwrap-"))
        self.egress = EgressProxy.in_private_dir()
        try:
            cgroup = SandboxCgroup.create(spec.name, memory_mb=spec.memory_mb, pids=spec.pids, cpus=spec.cpus,
                                          parent=spec.cgroup_parent)
            if cgroup is None:
                raise ConfigError(no_cgroup_message(spec.cgroup_parent))
            self.cgroup = cgroup
            self.disk = DiskGuard.of((self._workspace, self._tmp), spec, self.cgroup.kill, self.cgroup.oom_kills)
        except BaseException:
            self.egress.close()
            remove_tree(self._tmp)
            raise
        self.limits = f"cgroup v{self.cgroup.version}"
        self._transport: ProcessTransport | None = None  # the running agentd's, for how it ended (`death`)
        self._oom_kills = 0  # out-of-memory kills in the cgroup already told (`death`)

    def argv(self, command: Sequence[str] = ()) -> list[str]:
        """The full command line that starts `command` (default: agentd) in this sandbox."""
        egress_socket = f"{EGRESS_INSIDE}/{self.egress.path.name}"
        env = clean_env("/tmp", "bwrap", sandbox_path(self._spec.path, self._hidden, SAFE_PATH)) | SAFE_DIRECTORY
        env["DECODE_EGRESS_SOCKET"] = egress_socket
        # --as-pid-1: agentd is the sandbox's pid 1, so no signal from inside reaches it, and no bwrap reaper
        # holds its channel where a command could open it through /proc (agentd itself is undumpable)
        args = [self._bwrap, "--die-with-parent", "--new-session", "--unshare-pid", "--as-pid-1", "--unshare-ipc",
                "--unshare-uts", "--unshare-net", "--unshare-cgroup-try", "--hostname", "decode-sandbox"]
        args += root_binds()
        args += ["--dev", "/dev", "--proc", "/proc", "--bind", str(self._tmp), "/tmp", "--tmpfs", "/run"]
        for path in self._hidden:
            if path not in FRESH:
                args += ["--tmpfs", path] if os.path.isdir(path) else ["--ro-bind", "/dev/null", path]
        for path in reexposed(self._hidden):
            args += ["--ro-bind", path, path]
        args += ["--ro-bind", str(agentd_file()), AGENTD_INSIDE, "--ro-bind", str(self.egress.directory), EGRESS_INSIDE,
                 "--bind", str(self._workspace), WORKSPACE, "--chdir", WORKSPACE, "--cap-drop", "ALL", "--clearenv"]
        for key, value in env.items():
            args += ["--setenv", key, value]
        return args + ["--", *(command or (sys.executable, "-I", AGENTD_INSIDE, WORKSPACE))]

    def start(self, policy: EgressPolicy) -> ProcessTransport:
        """Start bwrap + agentd inside the sandbox's limits, its egress proxy applying `policy`."""
        self.egress.policy = policy
        self.disk.check()
        self._transport = ProcessTransport(self.cgroup.wrap(self.argv()), _host_env())
        return self._transport

    @classmethod
    def setup_cache_base(cls, image: str, path: Sequence[str] = ()) -> str:
        """The host toolchain a sandbox with `path` first on its PATH sees (`toolchain_digest`); the image
        is not used."""
        return toolchain_digest(path)

    @classmethod
    def drop_setup_cache(cls, tag: str) -> bool:
        """True: an entry is its archive alone."""
        return True

    def save_setup_cache(self, tag: str, archive: Path, cap_bytes: int) -> Saved:
        """Write setup's workspace files and HOME to `archive` from inside a sandbox like the agent's;
        `SandboxError` past `cap_bytes` or when archiving fails."""
        script = [sys.executable, "-I", "-c", save_script(WORKSPACE)]
        return Saved(save_locally(self.cgroup.wrap(self.argv(script)), _host_env(), archive, 0, cap_bytes), tag)

    def restore_setup_cache(self, archive: Path) -> None:
        """Unpack a checked archive into the workspace and HOME, inside a sandbox like the agent's."""
        script = [sys.executable, "-I", "-c", restore_script(WORKSPACE)]
        restore_locally(self.cgroup.wrap(self.argv(script)), _host_env(), archive)

    def death(self) -> Death:
        """The cgroup's word: a new out-of-memory kill in it, else how bwrap's process tree ended (its signal)."""
        kills = self.cgroup.oom_kills()
        if kills > self._oom_kills:
            self._oom_kills = kills
            return out_of_memory(self._spec.memory_mb)
        if self._transport is None or not self._transport.ended:
            return Death("a process was killed in the running sandbox")
        return stopped_from_outside(self._transport.wait_exit())

    def stopped(self, now: bool = False, disk: bool = True) -> Cap | None:
        """The disk or memory cap once the guard stopped the sandbox for passing it (`now`: measured first, the
        disk too unless not `disk`)."""
        return self.disk.measure(disk) if now else self.disk.exceeded

    def blocked(self) -> dict[str, int]:
        """What the egress proxy refused since the policy was last set ("host:port" -> attempts)."""
        return self.egress.blocked()

    def close(self) -> None:
        """Kill whatever is left in the cgroup, remove it, the sandbox's /tmp and its egress proxy."""
        self.disk.close()
        self.cgroup.close()
        self.egress.close()
        remove_tree(self._tmp)


def _host_env() -> dict[str, str]:
    """The environment bwrap itself runs with on the host: no $HOME/.local/bin (the host's /tmp) on its PATH."""
    return clean_env("/tmp", "bwrap") | {"PATH": SAFE_PATH}


def toolchain_digest(path: Sequence[str] = ()) -> str:
    """A digest of the host toolchain a bwrap sandbox with `path` first on its PATH sees (see the module
    docstring); it changes when the distribution, a system package, the harness's Python or any tool on
    that PATH changes."""
    digest = hashlib.sha256()

    def add(*parts: object) -> None:
        digest.update(json.dumps(parts).encode() + b"\n")

    add(os.uname().machine, sys.version, os.path.realpath(sys.executable))
    for name in ("/etc/os-release", *PACKAGE_DBS):
        try:
            add(name, hashlib.sha256(Path(name).read_bytes()).hexdigest())
        except OSError:
            add(name, None)
    for directory in sandbox_path(path, hidden_paths(Path(WORKSPACE), []), SAFE_PATH).split(os.pathsep):
        listing = []
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            entries = []
        for entry in entries:
            try:
                st = entry.stat()
                listing.append((entry.name, os.readlink(entry.path) if entry.is_symlink() else None, st.st_size,
                                st.st_mtime_ns))
            except OSError:
                listing.append((entry.name, None, 0, 0))
        add(directory, os.path.realpath(directory), listing)
    return "bwrap:" + digest.hexdigest()


def no_cgroup_message(parent: Path | None) -> str:
    """The one line that says why bwrap will not start without a cgroup, and what to do."""
    where = (f"DECODE_CGROUP_PARENT={parent} is not a writable cgroup v2 directory offering the pids and memory "
             f"controllers" if parent else "this user cannot create cgroups")
    return (f"SANDBOX_MODE=bwrap needs a cgroup to cap memory, pids and cpu for the whole sandbox, and {where}: "
            f"run as root, set DECODE_CGROUP_PARENT to a cgroup v2 directory delegated to this user "
            f"(action.yml shows how), or use SANDBOX_MODE=docker")


def root_binds() -> list[str]:
    """Bind every top-level entry of the host root read-only onto bwrap's tmpfs root.

    Binding entries one by one (instead of `--ro-bind / /`) leaves the root itself
    a tmpfs, so /workspace and /run/decode can be created even though the host
    has no such directories.
    """
    args: list[str] = []
    for name in sorted(os.listdir("/")):
        path = "/" + name
        if path in OWN_MOUNTS:
            continue
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.exists(path):
            args += ["--ro-bind", path, path]
    return args


def hidden_paths(workspace: Path, extra: list[Path]) -> list[str]:
    """The existing host paths to mask, outermost first, nested duplicates dropped (incl. `FRESH`)."""
    candidates = [*FRESH, *SECRET_DIRS, *SECRET_FILES, str(Path.home()), os.path.expanduser("~")]
    if workspace.parent != Path("/"):
        candidates.append(str(workspace.parent))
    candidates += [str(p) for p in extra]
    real = sorted({os.path.realpath(p) for p in candidates if os.path.lexists(p)}, key=lambda p: (len(p), p))
    kept: list[str] = []
    for path in real:
        if path in ("/", "/proc", "/dev") or any(_within(path, k) for k in kept):
            continue
        kept.append(path)
    return kept


def reexposed(hidden: list[str]) -> list[str]:
    """Host paths the sandbox needs even when they sit under a hidden one: Python and DNS config."""
    wanted = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    wanted.add(os.path.dirname(os.path.abspath(sys.executable)))
    wanted.add(os.path.realpath(os.path.dirname(sys.executable)))
    resolv = os.path.realpath("/etc/resolv.conf")
    if os.path.exists(resolv):
        wanted.add(resolv)
    needed = sorted(p for p in wanted if any(_within(p, h) for h in hidden))
    return [p for p in needed if not any(_within(p, q) and p != q for q in needed)]


def sandbox_path(entries: Iterable[str], hidden: list[str], base: str) -> str:
    """`base` with the host PATH `entries` that the sandbox can see put first (a runner's toolchains).

    An entry is dropped when it is relative, missing, or under a hidden path that is not bound back
    (`reexposed`); decode-bot's own virtualenv bin dir is dropped from both, so the agent's `python3`
    and `pip` are the runner's or the host's, never the harness's.
    """
    shown = reexposed(hidden)
    own = harness_bin()
    first: list[str] = []
    for entry in entries:
        real = os.path.realpath(entry)
        if not os.path.isabs(entry) or not os.path.isdir(real) or real == own:
            continue
        if any(_within(real, h) for h in hidden) and not any(_within(real, r) for r in shown):
            continue
        first.append(entry)
    rest = [p for p in base.split(os.pathsep) if p and os.path.realpath(p) != own]
    return os.pathsep.join(dict.fromkeys([*first, *rest]))


def _within(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")
