"""No package registry's host name is written into the repository: builds and test fixtures
fetch through what the machine is configured with (apt's sources, npm's registry), and
examples use neutral names like packages.example.com."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REGISTRY_HOSTS = (
    "registry.npmjs.org", "npmjs.com", "registry.yarnpkg.com", "deb.debian.org", "security.debian.org",
    "ftp.debian.org", "archive.ubuntu.com", "security.ubuntu.com", "pypi.org", "pythonhosted.org",
    "pypi.python.org", "crates.io", "rubygems.org", "proxy.golang.org", "repo1.maven.org", "repo.maven.apache.org",
    "dl-cdn.alpinelinux.org", "conda.anaconda.org", "repo.anaconda.com", "registry-1.docker.io", "ghcr.io",
)


def test_no_registry_host_name_appears_in_the_repository():
    pattern = "|".join(host.replace(".", r"\.") for host in REGISTRY_HOSTS)
    res = subprocess.run(
        ["git", "grep", "--untracked", "-n", "-I", "-i", "-E", pattern, "--", ".", f":!{Path(__file__).name}",
         f":!tests/{Path(__file__).name}"],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert res.returncode == 1, f"registry host names in the repository:\n{res.stdout}{res.stderr}"


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
    assert res.returncode == 1 and "set MIRROR" in res.stderr
