"""The only way out of a bwrap or docker sandbox: an HTTP(S) egress proxy on the host.

Those sandboxes have no network interface but loopback, in every phase. agentd
relays 127.0.0.1:PORT inside to the unix socket of an `EgressProxy` that the
launcher runs on the host, and points every command at it through
`http_proxy`/`https_proxy`. The proxy takes `CONNECT host:port` (HTTPS, or any
TCP protocol a client tunnels) and absolute-form plain HTTP requests, and lets
each through or answers 403 according to an `EgressPolicy`.

Why a proxy rather than network rules: one mechanism serves bwrap and docker
alike; it sees the name a client asks for before anything is resolved, so
`allow_domains` can be enforced (a packet filter sees only addresses); it needs
no iptables, no privileges and no per-engine network setup; and the host's
network namespace is never shared with a sandbox. A name is looked up only
when the policy lets names through (`network` on, or `allow_domains` listing
it): anything else is a 403 before any lookup, so no data leaves in DNS labels.
It resolves names on the host, checks every address, and connects to the
address it checked, so a DNS answer cannot change between the check and the
connection. A plain-HTTP request's Host header must name the destination
checked, and that one request is all its connection carries upstream (a
pipelined second one could name another site); a tunnel let through by name
must open with a TLS ClientHello whose server name (SNI) is that name (peeked
at, never terminated). What happens inside TLS the proxy cannot see: a request
in a tunnel may name another site of the same front end (docs/security.md).

The limit: only clients that honour the proxy variables (curl, pip, git, npm,
apt, Python's urllib and requests...) get out. Raw TCP or UDP, DNS lookups and
ICMP from inside the sandbox reach nothing at all.

The decisions are in egress_policy.py (pure), the HTTP and socket plumbing in
egress_wire.py.
"""

from __future__ import annotations

import ipaddress
import os
import select
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Protocol

from bot.core.trees import remove_tree
from bot.sandbox.egress_policy import (METADATA, NEVER, EgressPolicy, IPAddress, own_addresses, refuse_host_header,
                                       refuse_server_name)
from bot.sandbox.agentd.relay import relay
from bot.sandbox.egress_wire import (ACCESS_DENIED, TLS_HANDSHAKE, OneExchange, Reply, Request, answer, bind_unix,
                                     cut, parse_request, read_client_hello)

__all__ = ["EgressPolicy", "EgressProxy", "HostUpstream", "Upstream"]
ESTABLISHED = b"HTTP/1.1 200 Connection established\r\n\r\n"


class EgressProxy:
    """An HTTP(S) forward proxy on a unix socket that lets through what `policy` allows.

    Threads, standard library only. `policy` may be replaced at any time;
    `blocked()` counts what it refused since then. `close()` stops the
    listener and every open connection.
    """

    MAX_CONNECTIONS = 256
    MAX_REJECTING = 16  # threads answering 503 to connections beyond the cap
    CONNECT_TIMEOUT_S = 10.0
    HEAD_MAX = 64 * 1024
    HEAD_TIMEOUT_S = 30.0
    IDLE_TIMEOUT_S = 900.0

    def __init__(self, path: str | Path, policy: EgressPolicy = EgressPolicy(), *, guard_host: bool = True,
                 upstream: Upstream | None = None) -> None:
        """Serve on the unix socket `path`, looking names up and connecting through `upstream` (default the
        host's). `guard_host=False` drops the host refusals no policy can lift (the host's own addresses,
        loopback; metadata endpoints stay refused): only for testing this plumbing against an origin on the
        test machine's loopback."""
        self.path = Path(path)
        self._guard_host = guard_host
        self._upstream = upstream or HostUpstream()
        self._policy = policy
        self._blocked: dict[str, int] = {}
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(self.MAX_CONNECTIONS)
        self._rejecting = threading.BoundedSemaphore(self.MAX_REJECTING)
        self._open: set[socket.socket] = set()
        self._closed = False
        self._directory: Path | None = None
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            bind_unix(self._listener, self.path)
            self._listener.listen(128)
            self._listener.setblocking(False)
        except OSError:
            self._listener.close()
            raise
        self._wake_r, self._wake_w = os.pipe()  # close() writes here to end the accept loop at once
        self._thread = threading.Thread(target=self._accept, name="egress-proxy", daemon=True)
        self._thread.start()

    @classmethod
    def in_private_dir(cls, parent: Path | None = None, policy: EgressPolicy = EgressPolicy(), *,
                       guard_host: bool = True, upstream: Upstream | None = None) -> EgressProxy:
        """A proxy on `proxy.sock` in a fresh 0700 directory (under `parent`), removed by `close()`."""
        directory = Path(tempfile.mkdtemp(prefix=".decode-egress-", dir=parent))
        try:
            proxy = cls(directory / "proxy.sock", policy, guard_host=guard_host, upstream=upstream)
        except BaseException:
            remove_tree(directory)
            raise
        proxy._directory = directory
        return proxy

    @property
    def directory(self) -> Path:
        return self._directory or self.path.parent

    @property
    def policy(self) -> EgressPolicy:
        return self._policy

    @policy.setter
    def policy(self, policy: EgressPolicy) -> None:
        """Apply `policy` to new connections, reset `blocked()`, and cut the connections made before."""
        with self._lock:
            self._policy, self._blocked = policy, {}
            live = list(self._open)
        cut(live)

    def blocked(self) -> dict[str, int]:
        """"host:port" -> how many connections the policy refused since it was last set."""
        with self._lock:
            return dict(self._blocked)

    def close(self) -> None:
        """Stop accepting, cut every open connection, remove the socket (and its private directory)."""
        with self._lock:
            already, self._closed = self._closed, True
            live = list(self._open)
        cut(live)
        if already:
            return
        os.write(self._wake_w, b"x")
        os.close(self._wake_w)  # the accept thread polls the read end, which it closes itself, with the listener
        self._thread.join(timeout=5)
        self.path.unlink(missing_ok=True)
        if self._directory is not None:
            remove_tree(self._directory)

    def _accept(self) -> None:
        """Accept connections until `close()` wakes it, then close the listener and the wake pipe's read end:
        the descriptors this thread polls are closed by this thread only, so `close()` returning before it
        woke (its join times out under load) never leaves it polling numbers reused elsewhere."""
        try:
            self._accept_until_woken()
        finally:
            self._listener.close()
            os.close(self._wake_r)

    def _accept_until_woken(self) -> None:
        poller = select.poll()
        poller.register(self._listener.fileno(), select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        while True:
            if any(fd == self._wake_r for fd, _ in poller.poll()):
                return
            try:
                client, _ = self._listener.accept()
            except BlockingIOError:
                continue
            except OSError:
                time.sleep(0.05)  # out of descriptors: let connections finish
                continue
            if self._slots.acquire(blocking=False):
                threading.Thread(target=self._serve, args=(client,), name="egress-conn", daemon=True).start()
            elif self._rejecting.acquire(blocking=False):
                threading.Thread(target=self._reject, args=(client,), name="egress-503", daemon=True).start()
            else:
                client.close()

    def _reject(self, client: socket.socket) -> None:
        try:
            answer(client, "503 Service Unavailable",
                   f"decode-bot's egress proxy has {self.MAX_CONNECTIONS} connections open: try again later")
        finally:
            client.close()
            self._rejecting.release()

    def _serve(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            self._track(client)
            head, rest = self._read_head(client)
            request = parse_request(head)
            policy = self.policy
            addresses = self._decide(request, policy)
            if request.method == "CONNECT" and policy.by_name(request.host):
                client.sendall(ESTABLISHED)  # the ClientHello comes only after it
                rest = self._check_server_name(client, rest, request, policy)
                try:
                    upstream = self._upstream.connect(addresses, request.port, self.CONNECT_TIMEOUT_S)
                except Reply as failure:  # the tunnel is open: an HTTP answer would only garble it
                    raise OSError(failure.body) from None
            else:
                upstream = self._upstream.connect(addresses, request.port, self.CONNECT_TIMEOUT_S)
                if request.method == "CONNECT":
                    client.sendall(ESTABLISHED)
            self._track(upstream, policy)
            client.settimeout(None)
            only = None if request.method == "CONNECT" else OneExchange(request)  # plain HTTP: one exchange
            if only is not None:
                rest = only.from_client(rest)
            if rest or request.forward:
                upstream.sendall(request.forward + rest)
            relay(client, upstream, self.IDLE_TIMEOUT_S, only)
        except Reply as reply:
            answer(client, reply.status, reply.body)
        except OSError:
            pass  # a side went away, or a tunnel was refused after it opened
        except Exception as e:  # noqa: BLE001 - a request we did not foresee ends its connection, not the proxy
            answer(client, "502 Bad Gateway", f"decode-bot's egress proxy failed: {type(e).__name__}: {e}")
        finally:
            for sock in (client, upstream):
                if sock is not None:
                    with self._lock:
                        self._open.discard(sock)
                    sock.close()
            self._slots.release()

    def _decide(self, request: Request, policy: EgressPolicy) -> list[IPAddress]:
        """The checked addresses to connect to, or a 403 Reply naming the rule: the name, the Host header and
        the request's shape are judged before any lookup, the addresses after it."""
        reason = policy.refuse_name(request.host) or refuse_host_header(list(request.host_headers), request.host)
        if reason is not None:
            raise self._refusal(policy, request, reason)
        addresses = self._upstream.resolve(request.host, request.port)
        try:
            own = own_addresses() if self._guard_host else frozenset()
        except OSError as e:
            raise Reply("502 Bad Gateway", f"cannot tell this machine's own addresses ({e})") from None
        never = NEVER if self._guard_host else METADATA
        for address in addresses:
            reason = reason or policy.refuse_address(address, own, never)
        if reason is not None:
            raise self._refusal(policy, request, reason)
        return addresses

    def _check_server_name(self, client: socket.socket, rest: bytes, request: Request, policy: EgressPolicy) -> bytes:
        """The tunnel's first bytes, once its TLS ClientHello names the host checked; else the refusal is
        counted and sent (a fatal access_denied alert to a TLS client, a 403 to anything else) and OSError ends
        the connection."""
        client.settimeout(self.HEAD_TIMEOUT_S)
        data, name = read_client_hello(client, rest, self.HEAD_MAX)
        reason = refuse_server_name(name, request.host)
        if reason is None:
            return data
        refusal = self._refusal(policy, request, reason)
        if data[:1] == bytes([TLS_HANDSHAKE]):
            client.sendall(ACCESS_DENIED)
        else:
            answer(client, refusal.status, refusal.body)
        raise OSError(refusal.body)

    def _refusal(self, policy: EgressPolicy, request: Request, reason: str) -> Reply:
        """Count a refusal under `policy` (unless it was replaced meanwhile) and word its 403."""
        key = f"[{request.host}]:{request.port}" if ":" in request.host else f"{request.host}:{request.port}"
        with self._lock:
            if self._policy is policy:
                self._blocked[key] = self._blocked.get(key, 0) + 1
        return Reply("403 Forbidden", f"decode-bot's egress proxy blocked {key}: {reason}")

    def _track(self, sock: socket.socket, decided_under: EgressPolicy | None = None) -> None:
        with self._lock:
            if self._closed or (decided_under is not None and decided_under is not self._policy):
                sock.close()
                raise OSError("the egress proxy is closed, or its policy changed during the decision")
            self._open.add(sock)

    def _read_head(self, client: socket.socket) -> tuple[bytes, bytes]:
        client.settimeout(self.HEAD_TIMEOUT_S)
        data = b""
        while b"\r\n\r\n" not in data:
            if len(data) > self.HEAD_MAX:
                raise Reply("431 Request Header Fields Too Large", f"the request head passed {self.HEAD_MAX} bytes")
            chunk = client.recv(65536)
            if not chunk:
                raise OSError("the client left before its request was complete")
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        if len(head) > self.HEAD_MAX:
            raise Reply("431 Request Header Fields Too Large", f"the request head passed {self.HEAD_MAX} bytes")
        return head, rest


class Upstream(Protocol):
    """Where the proxy looks names up and connects: the host's resolver and network (`HostUpstream`); the
    tests pass a double that answers from a table and records every lookup."""

    def resolve(self, host: str, port: int) -> list[IPAddress]:
        """Every address `host` resolves to; a 502 Reply when it does not resolve."""
        ...

    def connect(self, addresses: list[IPAddress], port: int, timeout: float) -> socket.socket:
        """A connection to the first of `addresses` that answers; a 502 Reply when none does."""
        ...


class HostUpstream:
    """The machine's own resolver and network."""

    def resolve(self, host: str, port: int) -> list[IPAddress]:
        """Every address `host` resolves to on this machine (a 502 when it does not resolve)."""
        try:
            infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError, ValueError) as e:
            raise Reply("502 Bad Gateway", f"could not resolve {host}: {e}") from None
        found = dict.fromkeys(ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos)
        if not found:
            raise Reply("502 Bad Gateway", f"{host} has no address")
        return list(found)

    def connect(self, addresses: list[IPAddress], port: int, timeout: float) -> socket.socket:
        """A connection to the first of the checked `addresses` that answers (a 502 when none does)."""
        error: OSError | None = None
        for address in addresses:
            try:
                sock = socket.create_connection((str(address), port), timeout=timeout)
                sock.settimeout(None)
                return sock
            except OSError as e:
                error = e
        raise Reply("502 Bad Gateway",
                    f"could not connect to port {port} of {', '.join(map(str, addresses))}: {error}")
