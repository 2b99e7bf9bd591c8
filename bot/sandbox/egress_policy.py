"""What a sandbox may reach: `EgressPolicy` and the address rules the egress proxy applies.

Pure decisions over names and addresses (no I/O but reading this machine's own
addresses from /proc), kept apart from the proxy in egress.py so the protocols
in `bot.sandbox` and every launcher can import the policy without a cycle.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from bot.core.errors import ConfigError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
CONFIG = ".github/decode.yml"
CEILING = "DECODE_ALLOW_CIDRS_MAX"
# Never reached unless allow_cidrs lists them. Written out rather than `is_private`, which also
# counts the documentation ranges (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24) as private.
DENIED = tuple((ipaddress.ip_network(net), what) for net, what in (
    ("0.0.0.0/8", "'this network'"),
    ("10.0.0.0/8", "a private range"),
    ("100.64.0.0/10", "the carrier-grade NAT range"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local (cloud metadata)"),
    ("172.16.0.0/12", "a private range"),
    ("192.0.0.0/24", "the IETF protocol assignments range"),
    ("192.168.0.0/16", "a private range"),
    ("198.18.0.0/15", "the benchmarking range"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),
    ("::/128", "the unspecified address"),
    ("::1/128", "loopback"),
    ("::/96", "an IPv4-compatible address"),
    ("::ffff:0:0:0/96", "an IPv4-translated address"),
    ("64:ff9b:1::/48", "local-use NAT64"),
    ("100::/64", "the discard-only range"),
    ("2001::/32", "Teredo"),
    ("2002::/16", "6to4"),
    ("fc00::/7", "a unique local range"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "site-local"),
    ("ff00::/8", "multicast"),
))
# Never reached, whatever allow_cidrs says: the machine itself...
HOST_RANGES = tuple((ipaddress.ip_network(net), what) for net, what in (
    ("0.0.0.0/8", "'this network'"),
    ("127.0.0.0/8", "loopback"),
    ("::/128", "the unspecified address"),
    ("::1/128", "loopback"),
    ("fe80::/10", "link-local"),
))
# ...and every cloud's metadata and instance services, in each form they are served at.
METADATA = tuple((ipaddress.ip_network(net), what) for net, what in (
    ("169.254.0.0/16", "link-local (cloud metadata)"),
    ("fd00:ec2::/64", "AWS's instance services (metadata fd00:ec2::254, DNS, time)"),
    ("fd20:ce::254/128", "Google Cloud's metadata server over IPv6"),
    ("100.100.100.200/32", "Alibaba Cloud's metadata server, in the carrier-grade NAT range"),
    ("168.63.129.16/32", "Azure's wireserver"),
    ("192.0.0.192/32", "Oracle Cloud's metadata server"),
))
NEVER = HOST_RANGES + METADATA
# IPv6 forms that carry an IPv4 address: a range reaching into one needs the operator's ceiling.
EMBEDDING = tuple(ipaddress.ip_network(net) for net in (
    "::/96", "::ffff:0:0/96", "::ffff:0:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48", "2001::/32", "2002::/16"))
NAT64 = ipaddress.ip_network("64:ff9b::/96")
LOCAL_NAT64 = ipaddress.ip_network("64:ff9b:1::/48")
TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")
COMPATIBLE = ipaddress.ip_network("::/96")


@dataclass(frozen=True)
class EgressPolicy:
    """What a sandbox may reach through the egress proxy. The default reaches nothing.

    `internet`: public addresses, on any port. `allow_cidrs`: these ranges, even
    private ones, but never the host (`HOST_RANGES`, its own addresses) or a metadata
    endpoint (`METADATA`). `allow_domains` (`*.example.com` matches every subdomain, `*`
    every name): when given, only these names (and addresses inside `allow_cidrs`)
    are reached, whatever `internet` says. A name is looked up only when `internet`
    is on or `allow_domains` lists it; every address it resolves to must pass:
    inside `allow_cidrs`, or public and not the host's own. An IPv6 address that
    carries an IPv4 one (mapped, translated, NAT64, 6to4, Teredo) is judged as both.
    """

    internet: bool = False
    allow_cidrs: tuple[str, ...] = ()
    allow_domains: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        networks(self.allow_cidrs)  # a CIDR that does not parse is an error now, not in a proxy thread

    def refuse_name(self, host: str) -> str | None:
        """Why `host` (a name or an address literal) may not be reached, decided before any lookup; else None."""
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
        if self.internet or (self.allow_cidrs and literal is not None):
            return None  # the addresses decide
        if self.allow_cidrs:
            return (f"network is off for the agent and {host} is a name, which is not looked up (allow_cidrs opens "
                    f"addresses only): set network: true or allow_domains in {CONFIG}")
        return f"network is off for the agent: set network: true or allow_domains in {CONFIG}"

    def by_name(self, host: str) -> bool:
        """Whether `host` passes because allow_domains names it: then the name is the boundary, so a tunnel's
        TLS server name must be that name too (a shared front end would otherwise serve any site)."""
        return bool(self.allow_domains) and parse_ip(host) is None

    def refuse_address(self, address: IPAddress, own: frozenset[IPAddress] = frozenset(),
                       never: tuple[tuple[Network, str], ...] = NEVER) -> str | None:
        """Why `address` may not be reached (`own`: the host's addresses, `never`: ranges no policy
        opens); None when it may."""
        address = ipaddress.ip_address(address)
        candidates = (*embedded_ipv4(address), address)  # judged first as the IPv4 it carries
        for candidate, network, what in matches(candidates, never):
            return f"{named(address, candidate)} is {what} ({network}), which is never reachable"
        if any(candidate in own for candidate in candidates):
            return f"{address} is an address of the machine running the sandbox, which is never reachable"
        if in_cidrs(address, self.allow_cidrs):
            return None
        if not self.internet and not self.allow_domains:
            return (f"network is off for the agent and allow_cidrs does not list {address}: "
                    f"set network: true, allow_domains or allow_cidrs in {CONFIG}")
        for candidate, network, what in matches(candidates, DENIED):
            return f"{named(address, candidate)} is {what} ({network}): list it in allow_cidrs in {CONFIG} to reach it"
        return None


def matches(candidates: tuple[IPAddress, ...], ranges: tuple[tuple[Network, str], ...]
            ) -> Iterator[tuple[IPAddress, Network, str]]:
    """(candidate, range, what the range is) for each of `candidates` inside one of `ranges`, in order."""
    for candidate in candidates:
        for network, what in ranges:
            if candidate.version == network.version and candidate in network:
                yield candidate, network, what


def named(address: IPAddress, candidate: IPAddress) -> str:
    """`address`, saying which IPv4 address it carries when `candidate` is that one."""
    return str(address) if candidate == address else f"{address} (carrying {candidate})"


def refuse_host_header(values: list[str], host: str) -> str | None:
    """Why a plain-HTTP request to `host` may not carry the Host header(s) `values`; None when it may. The
    header must name the host checked (its port may differ): a shared front end serves the site it names."""
    if len(values) > 1:
        return f"the request has {len(values)} Host headers: send one, naming {host}"
    if not values:
        return None
    try:
        name = urlsplit("//" + values[0].strip()).hostname or ""
    except ValueError:
        name = ""
    if name.rstrip(".") != host.lower().strip("[]").rstrip("."):
        return f"the Host header names {values[0].strip()[:200]!r}, not {host}, the host checked"
    return None


def refuse_server_name(server_name: str | None, host: str) -> str | None:
    """Why a tunnel to `host`, allowed by name, may not carry a TLS ClientHello naming `server_name`
    (None: no ClientHello, or one without a name); None when it may."""
    if server_name is None:
        return (f"the tunnel to {host} does not open with a TLS ClientHello naming it (SNI), and allow_domains "
                "lets a tunnel through by that name only")
    if server_name.lower().rstrip(".") != host.lower().rstrip("."):
        return f"the TLS server name (SNI) is {server_name[:200]!r}, not {host}, the name checked"
    return None


def check_ceiling(cidrs: tuple[str, ...], ceiling: tuple[str, ...]) -> None:
    """Raise a ConfigError naming `CEILING` when a range of `cidrs` (decode.yml's allow_cidrs) opens more than
    the operator's `ceiling`: each range must lie inside a ceiling range, or hold only public addresses
    (none in `DENIED`, none in an IPv6 form carrying an IPv4 address). Unset, nothing private may be opened."""
    limits = networks(ceiling)
    for cidr, network in zip(cidrs, networks(cidrs)):
        if any(network.version == limit.version and network.subnet_of(limit)  # type: ignore[arg-type]  # same version
               for limit in limits):
            continue
        special = [n for n, _ in DENIED if n.version == network.version and n.overlaps(network)]
        special += [n for n in EMBEDDING if n.version == network.version and n.overlaps(network)]
        if special:
            allowed = ", ".join(ceiling) or "unset: public ranges only"
            raise ConfigError(f"{CONFIG}: allow_cidrs lists {cidr}, which reaches {special[0]}: the operator's "
                              f"{CEILING} ({allowed}) does not cover it; ask them to add it there, or remove it")


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
    """Whether `address` and every IPv4 address it carries (`embedded_ipv4`) are all inside `cidrs`: a 6to4,
    Teredo, NAT64 or IPv4-compatible address is routed as IPv6 and lands on the IPv4 host too, so both ends
    must be allowed. An IPv4-mapped address is the IPv4 address itself, and is judged as that."""
    address = ipaddress.ip_address(address)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    ranges = networks(cidrs)
    return all(any(candidate.version == network.version and candidate in network for network in ranges)
               for candidate in (address, *embedded_ipv4(address)))


def embedded_ipv4(address: IPAddress) -> list[ipaddress.IPv4Address]:
    """Every IPv4 address an IPv6 one carries (mapped, translated, NAT64 in both formats a local prefix
    may use, 6to4, Teredo's server and client, the deprecated IPv4-compatible form `::a.b.c.d`), each of
    which may be reached. (`::` and `::1` and the rest of ::/112 carry nothing: 0.0.x.x is no host.)"""
    if address.version != 6:
        return []
    assert isinstance(address, ipaddress.IPv6Address)
    value = int(address)
    found = [a for a in (address.ipv4_mapped, address.sixtofour) if a is not None]
    if address.teredo is not None:
        found += address.teredo
    if address in NAT64 or address in TRANSLATED or (address in COMPATIBLE and value >> 16):
        found.append(ipaddress.IPv4Address(value & 0xFFFFFFFF))
    if address in LOCAL_NAT64:  # RFC 6052: the /96 format, or the /48 one (16 bits, a reserved octet, 16 bits)
        formats = (value & 0xFFFFFFFF, (value >> 64 & 0xFFFF) << 16 | value >> 40 & 0xFFFF)
        found += [ipaddress.IPv4Address(carried) for carried in formats if carried]
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
