"""What a sandbox may reach: `EgressPolicy` and the address rules the egress proxy applies.

Pure decisions over names and addresses (no I/O but reading this machine's own
addresses from /proc), kept apart from the proxy in egress.py so the protocols
in `bot.sandbox` and every launcher can import the policy without a cycle.
"""

from __future__ import annotations

import functools
import ipaddress
from dataclasses import dataclass
from pathlib import Path

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
CONFIG = ".github/decode.yml"
# Never reached unless allow_cidrs lists them. Written out rather than `is_private`, which also
# counts the documentation ranges (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24) as private.
DENIED = tuple((ipaddress.ip_network(net), what) for net, what in (
    ("0.0.0.0/8", "'this network'"),
    ("10.0.0.0/8", "a private range"),
    ("100.64.0.0/10", "the carrier-grade NAT range"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local (cloud metadata)"),
    ("172.16.0.0/12", "a private range"),
    ("192.168.0.0/16", "a private range"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),
    ("::/128", "the unspecified address"),
    ("::1/128", "loopback"),
    ("::/96", "an IPv4-compatible address"),
    ("fc00::/7", "a unique local range"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "site-local"),
    ("ff00::/8", "multicast"),
))
# Never reached, whatever allow_cidrs says: the machine itself and its metadata endpoints.
NEVER = tuple(ipaddress.ip_network(net) for net in ("0.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "::/128",
                                                     "::1/128", "fe80::/10"))
NAT64 = ipaddress.ip_network("64:ff9b::/96")


@dataclass(frozen=True)
class EgressPolicy:
    """What a sandbox may reach through the egress proxy. The default reaches nothing.

    `internet`: public addresses, on any port. `allow_cidrs`: these ranges, even
    private ones, but never loopback, link-local (metadata) or the host's own
    addresses (`NEVER`). `allow_domains` (`*.example.com` matches every subdomain, `*`
    every name): when given, only these names (and addresses inside
    `allow_cidrs`) are reached, whatever `internet` says. Every address a name
    resolves to must pass: inside `allow_cidrs`, or public and not the host's own.
    """

    internet: bool = False
    allow_cidrs: tuple[str, ...] = ()
    allow_domains: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        networks(self.allow_cidrs)  # a CIDR that does not parse is an error now, not in a proxy thread

    def refuse_name(self, host: str) -> str | None:
        """Why `host` (a name or an address literal) may not be reached, checked before resolving; else None."""
        literal = parse_ip(host)
        if self.allow_domains:
            if literal is not None:
                if in_cidrs(literal, self.allow_cidrs):
                    return None
                return (f"{host} is an address and allow_domains lets only names through: "
                        f"add it to allow_cidrs in {CONFIG}")
            if not any(domain_matches(pattern, host) for pattern in self.allow_domains):
                return f"{host} is not in allow_domains: add it to allow_domains in {CONFIG}"
            return None
        if self.internet or self.allow_cidrs:
            return None  # the addresses decide
        return f"network is off for the agent: set network: true or allow_domains in {CONFIG}"

    def refuse_address(self, address: IPAddress, own: frozenset[IPAddress] = frozenset(),
                       never: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = NEVER) -> str | None:
        """Why `address` may not be reached (`own`: the host's addresses, `never`: ranges no policy
        opens); None when it may."""
        address = ipaddress.ip_address(address)
        candidates = (address, *embedded_ipv4(address))
        for candidate in candidates:
            for network, what in DENIED:
                if network in never and candidate.version == network.version and candidate in network:
                    return f"{address} is {what} ({network}), which is never reachable"
        if any(candidate in own for candidate in candidates):
            return f"{address} is an address of the machine running the sandbox, which is never reachable"
        if in_cidrs(address, self.allow_cidrs):
            return None
        if not self.internet and not self.allow_domains:
            return (f"network is off for the agent and allow_cidrs does not list {address}: "
                    f"set network: true, allow_domains or allow_cidrs in {CONFIG}")
        for candidate in candidates:
            for network, what in DENIED:
                if candidate.version == network.version and candidate in network:
                    return f"{address} is {what} ({network}): list it in allow_cidrs in {CONFIG} to reach it"
        return None


def parse_ip(host: str) -> IPAddress | None:
    """`host` as an address when it is an IP literal (brackets and an IPv6 zone allowed), else None."""
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


@functools.lru_cache(maxsize=64)
def networks(cidrs: tuple[str, ...]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """`cidrs` parsed (host bits allowed, as in 10.1.2.3/8); ValueError names the one that is not a CIDR."""
    return tuple(ipaddress.ip_network(cidr, strict=False) for cidr in cidrs)


def in_cidrs(address: IPAddress, cidrs: tuple[str, ...]) -> bool:
    for network in networks(cidrs):
        for candidate in (address, *embedded_ipv4(address)):
            if candidate.version == network.version and candidate in network:
                return True
    return False


def embedded_ipv4(address: IPAddress) -> list[ipaddress.IPv4Address]:
    """The IPv4 address an IPv6 one carries (mapped, 6to4, NAT64), which may reach that IPv4 host."""
    if address.version != 6:
        return []
    assert isinstance(address, ipaddress.IPv6Address)
    found = [a for a in (address.ipv4_mapped, address.sixtofour) if a is not None]
    if address in NAT64:
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return found


def domain_matches(pattern: str, host: str) -> bool:
    """`example.com` matches itself only, `*.example.com` any name under it, `*` every name."""
    pattern, host = pattern.lower().rstrip("."), host.lower().rstrip(".")
    if pattern == "*":
        return True
    if pattern.startswith("*."):
        return host.endswith(pattern[1:])
    return host == pattern


def own_addresses() -> frozenset[IPAddress]:
    """Every address of this machine's network namespace, read from /proc at each call (a fraction
    of a millisecond) so that an address added a moment ago counts too; OSError when unreadable."""
    found: set[IPAddress] = set()
    previous = ""
    for line in Path("/proc/net/fib_trie").read_text().splitlines():  # OSError: the proxy fails closed
        text = line.strip()
        if text.startswith("|--"):
            previous = text[3:].strip()
        elif text == "/32 host LOCAL" and previous:
            found.add(ipaddress.IPv4Address(previous))
    try:  # absent when IPv6 is off
        for line in Path("/proc/net/if_inet6").read_text().splitlines():
            found.add(ipaddress.IPv6Address(int(line.split()[0], 16)))
    except (OSError, ValueError, IndexError):
        pass
    return frozenset(found)
