"""`SANDBOX_MODE=modal`: agentd in a Modal sandbox (gVisor), one persistent `Sandbox.exec`.

The sandbox is created in the app `decode-bot` (looked up, created if missing)
from `spec.image` (`DECODE_SANDBOX_IMAGE`, a registry image that brings python3,
as for docker) with git installed by `apt_install`, running `sleep infinity`.
It gets `spec.cpus`, `spec.memory_mb`, `spec.gpu` (e.g. "H200:4") and a lifetime
timeout (`spec.lifetime_s`), and no secret and no variable of the host: only
the fixed environment below.

Network: the `EgressPolicy` maps onto Modal's own controls
(https://modal.com/docs/guide/sandbox-networking), enforced by Modal outside
the container, so there is no egress proxy and `blocked()` is empty:
nothing allowed -> `block_network=True`; `allow_cidrs` only ->
`outbound_cidr_allowlist` (any protocol); `allow_domains` ->
`outbound_domain_allowlist` (Modal lets only TLS on port 443 through to those
names), plus `outbound_cidr_allowlist` when `allow_cidrs` is set (the two add
up); `internet` -> Modal's default, outbound to any public address. A Modal
sandbox does not run on the harness's machine, so that machine's loopback and
addresses are not the sandbox's; which private or metadata addresses Modal's
own network lets a sandbox reach is Modal's business: its documentation
promises public addresses only, and `allow_cidrs` cannot widen an open
sandbox beyond that.

At start the workspace (with its .git) and the agentd zipapp are streamed in as one tar
into `tar -x` in the sandbox; then agentd runs as one `Sandbox.exec` whose
stdin/stdout carry the same JSON lines as every backend. The host workspace
is not synced back: the changes come out as a patch (agentd's export).

Modal cannot switch a live sandbox's network (outside an experimental call),
so `start(policy)` with another policy snapshots the filesystem (`snapshot_filesystem`), creates a new
sandbox from that image with the new setting, and terminates the old one.

The workspace is a copy (`Capabilities.keeps_workspace` is False): when the sandbox dies, the run
(bot/run/restart.py) opens a new one, uploads the workspace again and gives back the changes it checkpointed
after the last turn that made any (`restore_changes`: the hand-back patch, applied with `git apply` inside).

With `DECODE_POOL_SIZE` > 0 sandboxes come from a warm pool (warm_pool.py).

Setup cache (`Capabilities.setup_cache`, bot/run/setup_cache.py): `save_setup_cache` archives setup's
untracked and ignored workspace files from inside the sandbox (bot/sandbox/setup_files.py), then
snapshots the file system: the entry's image is `decode-setup-cache:<key>@<snapshot id>`, kept by Modal
for its ttl (30 days; Modal has no call to delete one). The snapshot holds HOME and whatever setup
installed as root outside the workspace, and also the workspace as it was: a run started from it
(`Image.from_id`, never from the warm pool) empties /workspace before uploading its own copy, then
`restore_setup_cache` unpacks the checked archive into it. An entry's base is the image's definition
(registry reference, `ADD_PYTHON`, git from apt), what Modal caches its build by.

The client is the `modal` package, unless another object of the same shape is
injected: for the process with `use_client` (tests: `tests.fakes.modal_double`,
a double on local bubblewrap processes), or for one launcher as `client=`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

from bot.core.errors import ConfigError, SandboxError
from bot.core.extras import requires_extra
from bot.sandbox import warm_pool
from bot.sandbox.egress_policy import EgressPolicy
from bot.sandbox.local import clean_env
from bot.sandbox.modal_stream import CHUNK, ModalTransport, write_all
from bot.sandbox.protocol import Capabilities, Death, SandboxSpec, stopped_from_outside
from bot.sandbox.setup_files import Saved, cache_image_id, restore_script, save_script, write_capped
from bot.sandbox.shipping import agentd_tar

APP_NAME = "decode-bot"
WORKSPACE = "/workspace"
AGENTD_INSIDE = "/opt/decode/agentd.pyz"
ADD_PYTHON = None  # the image brings python3 (3.8+) for agentd, as for docker; "3.12" would make Modal add one
SAFE_DIRECTORY = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": WORKSPACE}
ENV = clean_env("/root", "modal") | SAFE_DIRECTORY
DEATH_GRACE_S = 2.0  # how long a sandbox whose agentd stream ended may take to show as stopped
EMPTY = ("import os, shutil, sys\nfor e in os.scandir(sys.argv[1]):\n"  # a directory's content, not itself (a mount)
         "    shutil.rmtree(e.path) if e.is_dir(follow_symlinks=False) else os.unlink(e.path)")


_client: Any = None  # what `use_client` injected; None: the `modal` package


def use_client(client: Any) -> None:
    """Make `client` (an object shaped like the `modal` package, such as a test double) the modal client
    of every launcher this process makes from now on; None goes back to the `modal` package."""
    global _client
    _client = client


def load_client() -> Any:
    """The modal client: the one given to `use_client`, else the `modal` package (imported only here, on
    first use: it is large, and only this backend needs it)."""
    if _client is not None:
        return _client
    with requires_extra("modal", "SANDBOX_MODE=modal"):
        import modal
    return modal


def check_credentials() -> None:
    """A `ConfigError` before any work when Modal's client has no token: neither MODAL_TOKEN_ID and
    MODAL_TOKEN_SECRET nor a profile `modal token new` wrote (~/.modal.toml, or MODAL_CONFIG_PATH). A client
    without Modal's `config` (an injected double) brings its own credentials."""
    config = getattr(getattr(load_client(), "config", None), "config", None)
    if config is None:
        return
    try:
        found = config.get("token_id") and config.get("token_secret")
    except Exception as e:  # a malformed ~/.modal.toml or MODAL_* value: Modal's own message names it
        raise ConfigError(f"SANDBOX_MODE=modal: Modal's settings do not load ({e})") from None
    if not found:
        raise ConfigError("SANDBOX_MODE=modal needs Modal credentials: set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET, "
                          "or run `modal token new`")


class ModalLauncher:
    """One Modal sandbox per run; agentd in it through one persistent exec."""

    capabilities: ClassVar[Capabilities] = Capabilities(
        isolating=True, egress_policy=True, image=True, gpu=True, pool=True, setup_cache=True, keeps_workspace=False)
    root = WORKSPACE

    @classmethod
    def preflight(cls) -> None:
        """Modal's credentials (`check_credentials`)."""
        check_credentials()

    @classmethod
    def prepare_host(cls, spec: SandboxSpec) -> None:
        """With `spec.pool_size` (DECODE_POOL_SIZE), start filling the warm pool, so that even the first job
        claims a warm sandbox."""
        if spec.pool_size:
            prewarm(spec)

    def __init__(self, spec: SandboxSpec, *, client: Any = None, pool: int | None = None) -> None:
        """Look up the app and describe the image; the sandbox itself is created by the first `start`."""
        self._spec = spec
        self._workspace = spec.workspace.resolve()
        self._modal = client if client is not None else load_client()
        self._pool_size = spec.pool_size if pool is None else pool
        self.sandbox: Any = None
        self._transport: ModalTransport | None = None
        self._network = EgressPolicy()
        self._cache_image = cache_image_id(spec.image)  # a setup cache entry's snapshot, to start from
        self.acquired_from = ""
        self.acquire_s = 0.0
        self._closed = False
        try:
            self._app = self._modal.App.lookup(APP_NAME, create_if_missing=True)
            if self._cache_image is not None:
                self._image = self._modal.Image.from_id(self._cache_image)
            else:
                self._image = self._modal.Image.from_registry(spec.image, add_python=ADD_PYTHON).apt_install("git")
        except Exception as e:
            self.close()
            raise SandboxError(f"could not reach Modal for the app {APP_NAME} and image {spec.image} ({e}): "
                               f"check `modal token` and DECODE_SANDBOX_IMAGE") from None

    def _create(self, image: Any, policy: EgressPolicy, app: Any = None, idle_s: float = 0.0) -> Any:
        spec = self._spec
        options: dict[str, Any] = {"app": app or self._app, "image": image, "env": dict(ENV),
                                   "timeout": spec.lifetime_s + int(idle_s), "cpu": spec.cpus,
                                   "memory": spec.memory_mb, **network_options(policy)}
        if spec.gpu:
            options["gpu"] = spec.gpu
        try:
            return self._modal.Sandbox.create("sleep", "infinity", **options)
        except Exception as e:
            raise SandboxError(f"could not create a Modal sandbox from {spec.image}: {e}") from None

    def pool(self, policy: EgressPolicy, *, pinned: bool = False) -> warm_pool.WarmPool | None:
        """The process-wide warm pool for sandboxes like this one's (None with DECODE_POOL_SIZE=0).

        Calling it starts filling the pool: a server calls it once at startup
        (`prepare_host`) so that even its first job claims a warm sandbox.
        """
        if self._pool_size <= 0:
            return None
        spec = self._spec
        key = (id(self._modal), spec.image, policy, spec.cpus, spec.memory_mb, spec.gpu,
               spec.lifetime_s + int(warm_pool.IDLE_S))
        image, app, create = self._image, self._app, self._create
        return warm_pool.pool_for(key, self._pool_size, lambda: create(image, policy, app, warm_pool.IDLE_S),
                                  pinned=pinned)

    def _acquire(self, policy: EgressPolicy) -> Any:
        """A fresh sandbox from the image: claimed from the warm pool when there is one, else created."""
        started = time.monotonic()
        pool = self.pool(policy) if self._cache_image is None else None  # the pool holds the base image's
        sandbox = pool.claim() if pool is not None else None
        self.acquired_from = "pool" if sandbox is not None else "cold"
        if sandbox is None:
            sandbox = self._create(self._image, policy)
        self.acquire_s = time.monotonic() - started
        return sandbox

    def _upload(self) -> None:
        """Stream the workspace and agentd into the sandbox as one tar."""
        data = agentd_tar(AGENTD_INSIDE, self._workspace, WORKSPACE)
        try:
            if self._cache_image is not None:  # the snapshot's workspace is an earlier run's
                cleared = self.sandbox.exec("python3", "-I", "-c", EMPTY, WORKSPACE, text=False)
                if cleared.wait() != 0:
                    raise SandboxError(f"could not empty the snapshot's {WORKSPACE}: {cleared.stderr.read()!r}")
            proc = self.sandbox.exec("tar", "-x", "--no-same-owner", "-f", "-", "-C", "/", text=False)
            write_all(proc.stdin, data)
            proc.stdin.write_eof()
            proc.stdin.drain()
            code = proc.wait()
            err = b"" if code == 0 else proc.stderr.read()
        except Exception as e:
            raise SandboxError(f"could not upload the workspace to the Modal sandbox: {e}") from None
        if code != 0:
            text = err.decode(errors="replace") if isinstance(err, bytes) else str(err)
            raise SandboxError(f"could not unpack the workspace in the Modal sandbox (tar exit {code}): "
                               f"{text.strip()[-500:]}: the image needs tar", stderr=text)

    def start(self, policy: EgressPolicy) -> ModalTransport:
        """Create the sandbox (first call) or move to one with Modal's controls for `policy`; then exec agentd."""
        if self._closed:
            raise SandboxError("the Modal sandbox has been terminated")
        if self.sandbox is None:
            if not self._workspace.is_dir():
                raise ConfigError(f"the workspace {self._workspace} does not exist")
            self.sandbox = self._acquire(policy)
            self._network = policy
            self._upload()
        elif network_options(policy) != network_options(self._network):
            self._switch(policy)
        self._network = policy
        try:
            proc = self.sandbox.exec("python3", "-I", AGENTD_INSIDE, WORKSPACE, workdir=WORKSPACE, text=False)
        except Exception as e:
            raise SandboxError(f"could not start agentd in the Modal sandbox: {e}") from None
        self._transport = ModalTransport(proc)
        return self._transport

    def _switch(self, policy: EgressPolicy) -> None:
        try:
            image = self.sandbox.snapshot_filesystem()
        except Exception as e:
            raise SandboxError(f"could not snapshot the Modal sandbox to switch its network: {e}") from None
        new = self._create(image, policy)
        old, self.sandbox = self.sandbox, new
        self._network = policy
        _terminate(old)

    def death(self) -> Death:
        """Modal's word on the sandbox: how it ended (`poll`, asked again for `DEATH_GRACE_S`, since agentd's
        stream can end first), else that agentd ended in a running one, with its stderr. Modal reports no
        out-of-memory kill apart from the exit status, so none is named."""
        deadline = time.monotonic() + DEATH_GRACE_S
        while True:
            try:
                code = None if self.sandbox is None else self.sandbox.poll()
            except Exception as e:
                return Death(f"the Modal sandbox cannot be reached ({type(e).__name__}: {e})")
            if code is not None:
                return stopped_from_outside(code, "the Modal sandbox")
            if self.sandbox is None or time.monotonic() >= deadline:
                said = "" if self._transport is None else f": {self._transport.diagnostics()}"
                return Death(f"agentd ended in the running Modal sandbox{said}")
            time.sleep(0.05)

    def restore_changes(self, patch: bytes) -> None:
        """Apply `patch` (a hand-back since the base: the changes a dead sandbox had) to the workspace, inside
        the sandbox; `SandboxError` when it does not apply."""
        self._feed(("git", "-C", WORKSPACE, "apply", "--binary", "--whitespace=nowarn", "-"), [patch],
                   "restoring the workspace's changes")

    def _feed(self, argv: tuple[str, ...], chunks: Iterable[bytes], what: str) -> None:
        """Run `argv` in the sandbox with `chunks` on its stdin; `SandboxError` naming `what` when it fails."""
        if self.sandbox is None:
            raise SandboxError("the Modal sandbox has been terminated")
        try:
            proc = self.sandbox.exec(*argv, text=False)
            for chunk in chunks:
                write_all(proc.stdin, chunk)
            proc.stdin.write_eof()
            proc.stdin.drain()
            code, err = proc.wait(), proc.stderr.read()
        except Exception as e:
            raise SandboxError(f"{what} failed: {e}") from None
        if code != 0:
            raise SandboxError(f"{what} failed: {_text(err)[-300:]}")

    @classmethod
    def setup_cache_base(cls, image: str) -> str:
        """The definition of `image` (what Modal caches its build by); for a setup cache entry's image,
        `ConfigError` when Modal no longer has its snapshot."""
        found = cache_image_id(image)
        if found is None:
            return f"modal:{image} add_python={ADD_PYTHON} apt_install=git"
        try:
            load_client().Image.from_id(found).hydrate()
        except Exception as e:  # NotFoundError past its ttl; any other failure would fail the sandbox too
            raise ConfigError(f"its Modal image {found} cannot be used ({type(e).__name__}: {e})") from None
        return image

    @classmethod
    def drop_setup_cache(cls, tag: str) -> bool:
        """True: Modal has no call to delete an image; the snapshot goes at the end of its ttl."""
        return True

    def save_setup_cache(self, tag: str, archive: Path, cap_bytes: int) -> Saved:
        """Archive setup's workspace files (within `cap_bytes`), then snapshot the sandbox's file system;
        the image is `tag@<snapshot id>`. `SandboxError` when either fails."""
        if self.sandbox is None:
            raise SandboxError("the Modal sandbox has been terminated")
        try:
            proc = self.sandbox.exec("python3", "-I", "-c", save_script(WORKSPACE, home=False), text=False)
            used = write_capped((bytes(chunk) for chunk in proc.stdout), archive, 0, cap_bytes)
            code, err = proc.wait(), proc.stderr.read()
        except SandboxError:
            raise
        except Exception as e:
            raise SandboxError(f"archiving setup's files failed: {e}") from None
        if code != 0:
            raise SandboxError(f"archiving setup's files failed: {_text(err)[-300:]}")
        try:
            image = self.sandbox.snapshot_filesystem()
        except Exception as e:
            raise SandboxError(f"could not snapshot the Modal sandbox: {e}") from None
        return Saved(used, f"{tag}@{image.object_id}")

    def restore_setup_cache(self, archive: Path) -> None:
        """Unpack a checked setup cache archive into the workspace, inside the sandbox."""
        with archive.open("rb") as data:
            self._feed(("python3", "-I", "-c", restore_script(WORKSPACE)), iter(lambda: data.read(CHUNK), b""),
                       "restoring setup's files")

    def stopped(self, now: bool = False, disk: bool = True) -> None:
        """None: Modal enforces the sandbox's limits itself and reports no out-of-memory kill as one (`death`)."""
        return None

    def blocked(self) -> dict[str, int]:
        """Always empty: Modal enforces the policy itself and reports nothing back."""
        return {}

    def close(self) -> None:
        """Terminate the sandbox. Safe to call twice, and after any failure."""
        self._closed = True
        sandbox, self.sandbox = self.sandbox, None
        if sandbox is not None:
            _terminate(sandbox)


def prewarm(spec: SandboxSpec, *, network: EgressPolicy = EgressPolicy(), client: Any = None,
            size: int | None = None) -> warm_pool.WarmPool | None:
    """Start filling the warm pool for sandboxes like `spec`'s (the workspace does not matter)."""
    return ModalLauncher(spec, client=client, pool=size).pool(network, pinned=True)


def network_options(policy: EgressPolicy) -> dict[str, Any]:
    """The `Sandbox.create` parameters that make Modal enforce `policy` (see the module docstring)."""
    if policy.allow_domains:
        options: dict[str, Any] = {"outbound_domain_allowlist": list(policy.allow_domains)}
        if policy.allow_cidrs:
            options["outbound_cidr_allowlist"] = list(policy.allow_cidrs)
        return options
    if policy.internet:
        return {}
    if policy.allow_cidrs:
        return {"outbound_cidr_allowlist": list(policy.allow_cidrs)}
    return {"block_network": True}


def _text(data: Any) -> str:
    return (data.decode(errors="replace") if isinstance(data, bytes) else str(data)).strip()


def _terminate(sandbox: Any) -> None:
    try:
        sandbox.terminate()
    except Exception:
        pass
