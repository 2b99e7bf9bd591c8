"""No package registry's host name is written into the repository: builds and test fixtures
fetch through what the machine is configured with (apt's sources, npm's registry), and
examples use neutral names like packages.example.com.

The well-known registry hosts are listed here only as SHA-256 prefixes, so that this test
does not itself write the names it forbids; the hosts this machine is configured with (apt's
sources, npm's registry) are read from its configuration and forbidden too.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# sha256(host)[:16] of the public registries and mirrors of apt, npm, PyPI, crates, RubyGems, Go,
# Maven, Alpine, conda and container images.
REGISTRY_DIGESTS = frozenset({
    "0dc11026ac75c015", "3ca29e55be4befa4", "70bb4000cd2fab03", "e680c440a2e92079", "1ba4e37997a2e986",
    "c2b35955576ffa71", "a0f007d863a0ed19", "e514b0d3b0562f54", "a4aa2ac280bb8d1a", "8b5bb5eb9d758455",
    "d6d7019ca9fcbf07", "789e46d79514e280", "71741fe2460a6150", "00a7dc5a0cc38858", "43c04ed1dabe979b",
    "317d2d52829b7812", "8454fabc8b630901", "4db460c55b85212e", "15bdb44dafa6843b", "dcb6cc3991f9799e",
    "0fd460f0568e29c1",
})
HOST = re.compile(r"[a-z0-9-]+(\.[a-z0-9-]+)+")  # POSIX ERE, for git grep


def configured_hosts() -> set[str]:
    """The registry hosts this machine uses: apt's source URIs and npm's registry."""
    hosts = set()
    for source in [Path("/etc/apt/sources.list"), *Path("/etc/apt/sources.list.d").glob("*")]:
        try:
            text = source.read_text()
        except OSError:
            continue
        hosts |= {urllib.parse.urlsplit(u).hostname or "" for u in re.findall(r"[a-z+]+://[^\s\]]+", text)}
    npm = subprocess.run(["npm", "config", "get", "registry"], capture_output=True, text=True)
    hosts.add(urllib.parse.urlsplit(npm.stdout.strip()).hostname or "")
    return {h.lower() for h in hosts if h and h not in ("localhost", "127.0.0.1")}


def is_registry(token: str, configured: set[str]) -> bool:
    """Whether `token` is a registry host or a name under one (files.<registry> too)."""
    parts = token.lower().strip(".").split(".")
    suffixes = [".".join(parts[i:]) for i in range(len(parts) - 1)]
    return any(s in configured or hashlib.sha256(s.encode()).hexdigest()[:16] in REGISTRY_DIGESTS for s in suffixes)


def test_the_digests_recognise_a_registry_and_nothing_else():
    assert is_registry("files." + "python" + "hosted.org", set())
    assert not is_registry("packages.example.com", set()) and not is_registry("api.github.com", set())
    assert is_registry("mirror.internal.example", {"internal.example"})


def test_no_registry_host_name_appears_in_the_repository():
    res = subprocess.run(["git", "grep", "--untracked", "-I", "-o", "-n", "-i", "-E", HOST.pattern, "--", "."],
                         cwd=ROOT, capture_output=True, text=True)
    assert res.returncode in (0, 1), res.stderr
    configured = configured_hosts()
    found = [line for line in res.stdout.splitlines() if is_registry(line.rsplit(":", 1)[-1], configured)]
    assert not found, "registry host names in the repository:\n" + "\n".join(found)


def test_build_sh_takes_the_mirror_from_apts_sources(tmp_path):
    etc = tmp_path / "apt"
    (etc / "sources.list.d").mkdir(parents=True)
    (etc / "sources.list").write_text("# deb http://commented.example/debian bookworm main\n")
    (etc / "sources.list.d" / "extra.list").write_text(
        "deb [arch=amd64 signed-by=/k.gpg] http://nodes.example/node_20 nodistro main\n")
    (etc / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\n# http://snapshot.example/debian-security\nURIs: http://mirror.example/debian-security\n"
        "Suites: bookworm-security\nComponents: main\n\n"
        "Types: deb-src deb\nURIs: http://mirror.example/debian http://other.example/debian\n"
        "Suites: bookworm bookworm-updates\nComponents: main\n")
    build = [str(ROOT / "sandbox-image" / "build.sh"), "--print-mirror"]
    res = subprocess.run(build, env={"PATH": "/usr/bin:/bin", "APT_ETC": str(etc)}, capture_output=True, text=True)
    assert (res.returncode, res.stdout) == (0, "http://mirror.example/debian\n"), res.stderr
    (etc / "sources.list").write_text("deb http://list.example/debian bookworm main contrib\n")
    res = subprocess.run(build, env={"PATH": "/usr/bin:/bin", "APT_ETC": str(etc)}, capture_output=True, text=True)
    assert res.stdout == "http://list.example/debian\n", res.stderr
    res = subprocess.run(build, env={"PATH": "/usr/bin:/bin", "APT_ETC": str(etc), "SUITE": "trixie"},
                         capture_output=True, text=True)
    assert res.returncode == 2 and "set MIRROR" in res.stderr  # something to fix first
