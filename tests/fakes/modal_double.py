"""A double of the part of the `modal` client that `bot.sandbox.modal` and bot/modal_app.py call, on local
processes.

Run the modal backend against it with `bot.sandbox.modal.use_client(modal_double)`
(or `ModalLauncher(spec, client=modal_double)`). Names and parameters are the
real ones of modal 1.6.4; tests/sandbox/test_modal_api.py checks every
parameter the double accepts against the installed package.

Each sandbox is a private directory tree on the host. Its processes run under
bubblewrap: the host's system directories (/usr, /etc, ...) read-only as the
"image", the sandbox's own writable /workspace, /tmp, /root, /home, /opt, /var,
fresh /proc (own pid namespace) and /dev, no host network when
`block_network=True` or an outbound allowlist is given (the double cannot enforce
a list: it records it and keeps the network off), no variable of the host's environment, and a cgroup with
the `memory` and `cpu` asked for. Modal has no pids parameter; the double caps
every sandbox at `PIDS` tasks (gVisor's own task limit is not documented).

`snapshot_filesystem()` copies the writable directories into an image that
`Sandbox.create(image=...)` restores. `kill(sandbox)` simulates a sandbox
dying under the bot (the host reclaimed it, its lifetime ran out...).

`share_workspace(path)`: the conformance suite inspects the host workspace while
a sandbox runs (it plants symlinks there, reads what the sandbox wrote), which a
remote sandbox cannot offer. Inside this context, sandboxes bind `path` as their
/workspace instead of a private directory, and snapshots carry that binding on.
The upload itself is tested without it (tests/sandbox/test_modal.py).

Function calls (bot/modal_app.py's dispatcher): `Function(fn).spawn(...)` runs
`fn` on a thread of its own, as Modal runs it in a container of its own, and
returns a `FunctionCall`. Calls live in this module (Modal's side), not in the
object that spawned them, so `FunctionCall.from_id(call.object_id)` finds a call
from any "container" of the test, as a restarted dispatcher finds it on Modal.
`get(timeout=0)` raises the builtin TimeoutError while the call runs, returns its
value every time once it returned (modal keeps outputs: `clear_on_success=False`),
and raises modal's own exceptions where the real client does: what `fn` raised,
`FunctionTimeoutError` for a call that `kill_call` ended, `NotFoundError` for an
id Modal never gave out.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bot.sandbox.cgroup import SandboxCgroup

__version__ = "1.6.4"
PIDS = 512
MAX_BUFFER_SIZE = 2 * 1024 * 1024  # modal.io_streams.MAX_BUFFER_SIZE: what stdin.write takes between drains
WRITABLE = ("/workspace", "/tmp", "/root", "/home", "/opt", "/var", "/srv", "/mnt")
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
HIDDEN_FILES = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-")
_ids = itertools.count(1)
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="modal-double-spawner")
_shared: list[Path] = []
created: list["Sandbox"] = []  # every sandbox made in this process, for tests


class SandboxTerminatedError(Exception):
    """Raised like modal.exception.SandboxTerminatedError on a call to a finished sandbox."""


@contextlib.contextmanager
def share_workspace(path: Path) -> Iterator[None]:
    """Sandboxes created inside bind `path` as /workspace (see the module docstring)."""
    _shared.append(Path(path).resolve())
    try:
        yield
    finally:
        _shared.pop()


def kill(sandbox: "Sandbox") -> None:
    """Make `sandbox` die as if the platform had reclaimed it."""
    sandbox._finish(137)


class _CallState:
    """What Modal knows of one function call: running until `done`, then its value or exception."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None

    def end(self, value: Any = None, error: BaseException | None = None) -> None:
        if not self.done.is_set():  # a killed call's late return is lost, as a dead container's is
            self.value, self.error = value, error
            self.done.set()


_calls: dict[str, _CallState] = {}  # every call spawned in this process, by object id


class FunctionCall:
    """modal.FunctionCall: a handle on a call by its id; `from_id` is lazy, as the real one is."""

    def __init__(self, object_id: str) -> None:
        self.object_id = object_id

    @classmethod
    def from_id(cls, function_call_id: str, client: Any = None) -> "FunctionCall":
        return cls(function_call_id)

    def get(self, timeout: float | None = None, *, index: int = 0) -> Any:
        import modal.exception

        state = _calls.get(self.object_id)
        if state is None:
            raise modal.exception.NotFoundError(f"Function call {self.object_id} not found")
        if not state.done.wait(timeout):
            raise TimeoutError()
        if state.error is not None:
            raise state.error
        return state.value


class Function:
    """modal.Function over a local callable: `spawn` runs it on a thread, like a container of its own."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def spawn(self, *args: Any, **kwargs: Any) -> FunctionCall:
        call = FunctionCall(f"fc-double-{next(_ids)}")
        state = _calls[call.object_id] = _CallState()

        def run() -> None:
            try:
                value = self.fn(*args, **kwargs)
            except Exception as e:  # noqa: BLE001 - Modal hands the remote exception to `get`
                state.end(error=e)
            else:
                state.end(value)

        threading.Thread(target=run, name=call.object_id, daemon=True).start()
        return call


def kill_call(call: FunctionCall) -> None:
    """End `call` as Modal ends one whose container died for good (timeout, out of memory, crash loop)."""
    import modal.exception

    _calls[call.object_id].end(error=modal.exception.FunctionTimeoutError("Function call timed out"))


class App:
    """modal.App: only its lookup."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.app_id = f"ap-double-{name}"

    @staticmethod
    def lookup(name: str, *, client: Any = None, environment_name: str | None = None,
               create_if_missing: bool = False) -> "App":
        if not create_if_missing:
            raise LookupError(f"App {name!r} not found (the double only creates)")
        return App(name)


_images: dict[str, "Image"] = {}  # every image made in this process, by object id (Modal's side, like `_calls`)


class Image:
    """modal.Image: the host's system directories, plus the files of a snapshot when it is one.

    `Image.from_id(id)` is a lazy handle, as the real one is: nothing is looked up until it is used,
    by `hydrate()` or `Sandbox.create(image=...)`, which raise modal's `NotFoundError` for an id this
    "Modal" never gave out."""

    def __init__(self, tag: str, packages: tuple[str, ...] = (), layer: Path | None = None,
                 shared: Path | None = None) -> None:
        self.tag, self.packages, self.layer, self.shared = tag, packages, layer, shared
        self.object_id = f"im-double-{next(_ids)}"
        self._pending = False  # a `from_id` handle not looked up yet
        _images[self.object_id] = self

    @staticmethod
    def from_id(image_id: str, client: Any = None) -> "Image":
        handle = Image("")
        del _images[handle.object_id]
        handle.object_id, handle._pending = image_id, True
        return handle

    def hydrate(self, client: Any = None) -> "Image":
        if self._pending:
            import modal.exception

            found = _images.get(self.object_id)
            if found is None:
                raise modal.exception.NotFoundError(f"Image {self.object_id} not found")
            self.tag, self.packages, self.layer, self.shared = found.tag, found.packages, found.layer, found.shared
            self._pending = False
        return self

    @staticmethod
    def from_registry(tag: str, secret: Any = None, *, setup_dockerfile_commands: list[str] = [],  # noqa: B006
                      force_build: bool = False, add_python: str | None = None, **kwargs: Any) -> "Image":
        if secret is not None:
            raise AssertionError("the backend must not pass registry secrets")
        return Image(tag)

    def apt_install(self, *packages: str | list[str], force_build: bool = False,
                    env: dict[str, str | None] | None = None, secrets: Any = None, gpu: str | None = None) -> "Image":
        names = tuple(p for group in packages for p in ([group] if isinstance(group, str) else group))
        for name in names:
            if shutil.which(name) is None:
                raise RuntimeError(f"the double's image cannot install {name}: it is not on this host")
        return Image(self.tag, self.packages + names, self.layer, self.shared)


def expire(image_id: str) -> None:
    """Make Modal forget the image `image_id`, as it drops a snapshot once its ttl has passed."""
    del _images[image_id]


class StreamWriter:
    """ContainerProcess.stdin: write buffers (at most MAX_BUFFER_SIZE), drain flushes, write_eof closes after."""

    def __init__(self, pipe: Any) -> None:
        self._pipe = pipe
        self._buffer = bytearray()
        self._eof = False

    def write(self, data: bytes | bytearray | memoryview | str) -> None:
        if self._eof or self._pipe.closed:
            raise ValueError("Stdin is closed. Cannot write to it.")
        data = data.encode() if isinstance(data, str) else bytes(data)
        if len(self._buffer) + len(data) > MAX_BUFFER_SIZE:
            raise BufferError("Buffer size exceed limit. Call drain to flush the buffer.")
        self._buffer.extend(data)

    def write_eof(self) -> None:
        self._eof = True

    def drain(self) -> None:
        data, self._buffer = bytes(self._buffer), bytearray()
        try:
            if not self._pipe.closed:
                self._pipe.write(data)
                self._pipe.flush()
                if self._eof:
                    self._pipe.close()
        except (BrokenPipeError, ValueError, OSError) as e:
            raise SandboxTerminatedError(f"stdin is closed: {e}") from None


class StreamReader:
    """ContainerProcess.stdout/stderr: iterate for chunks (bytes, or str when text=True), or read() all."""

    def __init__(self, pipe: Any, text: bool) -> None:
        self._pipe, self._text = pipe, text

    def __iter__(self) -> Iterator[Any]:
        while True:
            chunk = os.read(self._pipe.fileno(), 65536)
            if not chunk:
                return
            yield chunk.decode(errors="replace") if self._text else chunk

    def read(self) -> Any:
        data = self._pipe.read()
        return data.decode(errors="replace") if self._text else data


class ContainerProcess:
    """modal.container_process.ContainerProcess over a local bwrap child."""

    def __init__(self, popen: subprocess.Popen[bytes], text: bool) -> None:
        self._popen = popen
        self.stdin = StreamWriter(popen.stdin)
        self.stdout = StreamReader(popen.stdout, text)
        self.stderr = StreamReader(popen.stderr, text)

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()

    def poll(self) -> int | None:
        return self._popen.poll()

    def wait(self) -> int:
        return self._popen.wait()


class Sandbox:
    """modal.Sandbox: a private root on the host, processes under bubblewrap."""

    def __init__(self, args: Sequence[str], image: Image, env: dict[str, str], block_network: bool,
                 cpu: float | None, memory: int | None, gpu: str | None, timeout: int | None,
                 workdir: str | None, allowlist: Sequence[str] | None, domains: Sequence[str] | None) -> None:
        self.object_id = f"sb-double-{next(_ids)}"
        self.image, self.block_network, self.gpu, self.cpu, self.memory = image, block_network, gpu, cpu, memory
        self.outbound_cidr_allowlist = list(allowlist or [])
        self.outbound_domain_allowlist = list(domains or [])
        self.env = dict(env)
        self.workdir = workdir or "/"
        self.dir = Path(tempfile.mkdtemp(prefix="modal-double-"))
        self.shared = _shared[-1] if _shared else image.shared
        for path in WRITABLE:
            source = image.layer / path.strip("/") if image.layer else None
            target = self.dir / path.strip("/")
            if source is not None and source.is_dir():
                shutil.copytree(source, target, symlinks=True)
            else:
                target.mkdir(mode=0o1777 if path == "/tmp" else 0o755)
        self.cgroup = SandboxCgroup.create(f"modal-{self.object_id}", memory_mb=memory or 4096, pids=PIDS, cpus=cpu)
        self._returncode: int | None = None
        self._procs: list[subprocess.Popen[bytes]] = []
        self._lock = threading.Lock()
        self._main = self._spawn(list(args), self.workdir, stdin=subprocess.DEVNULL)
        self._timer = threading.Timer(timeout, self._finish, (124,)) if timeout else None
        if self._timer:
            self._timer.daemon = True
            self._timer.start()
        created.append(self)

    @staticmethod
    def create(*args: str, app: App | None = None, image: Image | None = None, env: dict[str, str | None] | None = None,
               secrets: Any = None, timeout: int | None = 300, workdir: str | None = None, gpu: str | None = None,
               cpu: float | tuple[float, float] | None = None, memory: int | tuple[int, int] | None = None,
               block_network: bool = False, outbound_cidr_allowlist: Sequence[str] | None = None,
               outbound_domain_allowlist: Sequence[str] | None = None) -> "Sandbox":
        if app is None:
            raise ValueError("App must be provided when creating a sandbox outside a Modal container")
        if secrets:
            raise AssertionError("the backend must not pass secrets into a sandbox")
        if block_network and (outbound_cidr_allowlist is not None or outbound_domain_allowlist is not None):
            # modal.exception.InvalidError in the real client (modal/sandbox/_common.py)
            raise ValueError("`outbound_cidr_allowlist` and `outbound_domain_allowlist` cannot be used when "
                             "`block_network` is enabled")
        # The double cannot enforce an allowlist; it keeps the network off and records the lists.
        blocked = block_network or outbound_cidr_allowlist is not None or outbound_domain_allowlist is not None
        return Sandbox(args or ("sleep", "infinity"), (image or Image("debian:slim")).hydrate(),
                       {k: v for k, v in (env or {}).items() if v is not None}, blocked,
                       cpu if not isinstance(cpu, tuple) else cpu[1],
                       memory if not isinstance(memory, tuple) else memory[1], gpu, timeout, workdir,
                       outbound_cidr_allowlist, outbound_domain_allowlist)

    def _argv(self, args: list[str], workdir: str) -> list[str]:
        argv = ["bwrap", "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                "--hostname", "modal", "--cap-drop", "ALL", "--clearenv"]
        if self.block_network:
            argv.append("--unshare-net")
        for path in SYSTEM:
            if os.path.islink(path):
                argv += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                argv += ["--ro-bind", path, path]
        for path in HIDDEN_FILES:
            if os.path.exists(path):
                argv += ["--ro-bind", "/dev/null", path]
        argv += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/run"]
        for path in WRITABLE:
            source = self.shared if path == "/workspace" and self.shared else self.dir / path.strip("/")
            argv += ["--bind", str(source), path]
        for key, value in self.env.items():
            argv += ["--setenv", key, value]
        argv += ["--chdir", workdir, "--", *args]
        return self.cgroup.wrap(argv) if self.cgroup else argv

    def _spawn(self, args: list[str], workdir: str, stdin: Any = subprocess.PIPE) -> subprocess.Popen[bytes]:
        with self._lock:
            if self._returncode is not None:
                raise SandboxTerminatedError(f"Sandbox {self.object_id} has finished")
            # bwrap's --die-with-parent fires when the *thread* that forked it exits, and a real
            # sandbox outlives the client thread that created it: fork from one long-lived thread.
            proc = _SPAWNER.submit(subprocess.Popen, self._argv(args, workdir), stdin=stdin,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={"PATH": os.defpath},
                                   start_new_session=True).result()
            self._procs.append(proc)
            return proc

    def exec(self, *args: str, timeout: int | None = None, workdir: str | None = None,
             env: dict[str, str | None] | None = None, secrets: Any = None, text: bool = True,
             bufsize: int = -1) -> ContainerProcess:
        if secrets:
            raise AssertionError("the backend must not pass secrets into a sandbox")
        if workdir is not None and not workdir.startswith("/"):
            raise ValueError("workdir must be an absolute path")
        extra = [f"{k}={v}" for k, v in (env or {}).items() if v is not None]
        argv = ["env", *extra, *args] if extra else list(args)
        return ContainerProcess(self._spawn(argv, workdir or self.workdir), text)

    def poll(self) -> int | None:
        if self._returncode is None and self._main.poll() is not None:
            self._finish(self._main.returncode)
        return self._returncode

    @property
    def returncode(self) -> int | None:
        return self.poll()

    def terminate(self, *, wait: bool = False) -> int | None:
        self._finish(0 if self._returncode is None else self._returncode)
        return self._returncode if wait else None

    def snapshot_filesystem(self, timeout: int = 55, *, ttl: int | None = 2592000) -> Image:
        if self.poll() is not None:
            raise SandboxTerminatedError(f"Sandbox {self.object_id} has finished: cannot snapshot")
        layer = Path(tempfile.mkdtemp(prefix="modal-double-image-"))
        atexit.register(shutil.rmtree, layer, True)
        for path in WRITABLE:
            if path == "/workspace" and self.shared:
                continue
            shutil.copytree(self.dir / path.strip("/"), layer / path.strip("/"), symlinks=True)
        return Image(self.image.tag, self.image.packages, layer, self.shared)

    def _finish(self, code: int) -> None:
        with self._lock:
            if self._returncode is not None:
                return
            self._returncode = code
        if self._timer:
            self._timer.cancel()
        if self.cgroup is not None:
            self.cgroup.close()
        for proc in self._procs:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        for proc in self._procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        shutil.rmtree(self.dir, ignore_errors=True)
