"""The egress policy, enforced on the real bwrap and docker sandboxes against a fake internet.

The "internet" is a network namespace the test builds (tests/fakes/internet.py):
198.51.100.10 plays a public server, 10.77.0.10 one on a private network, and
the host serves on its loopback and on its own address 198.51.100.1. Commands
in the sandbox use the proxy variables agentd sets, as pip or git would; the
probe drops `no_proxy` so that even loopback addresses are asked of the proxy
(the sandbox's own loopback is not the host's: asked directly, they reach nothing).
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bot.sandbox import EgressPolicy, Sandbox, SandboxSpec, open_sandbox
from tests.conftest import make_repo
from tests.fakes.internet import HOST_PRIVATE, HOST_PUBLIC, Internet, internet  # noqa: F401 (fixture)
from tests.sandbox.conftest import IMAGE, MODES, require

BACKENDS = [p for p in MODES if p.values[0] in ("bwrap", "docker")]
# The setup phase's policy, and the agent's with `network: true` (no allow_cidrs): the same one.
INTERNET = EgressPolicy(internet=True)
PROBE = r"""python3 - {targets} <<'EOF'
import json, os, socket, sys, urllib.error, urllib.request
for name in ("no_proxy", "NO_PROXY"):
    os.environ.pop(name, None)
proxy = os.environ.get("http_proxy", "http://127.0.0.1:1")[len("http://"):].rsplit(":", 1)

def get(url):
    try:
        with urllib.request.urlopen(url, timeout=20) as r:
            return "%d %s" % (r.status, r.read().decode().strip())
    except urllib.error.HTTPError as e:
        return "%d %s" % (e.code, e.read().decode().strip())
    except Exception as e:
        return "error %s" % e

def read_head(s):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    return data

def connect(target):
    s = socket.create_connection((proxy[0], int(proxy[1])), timeout=20)
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
    head, _, rest = read_head(s).partition(b"\r\n\r\n")
    status = int(head.split()[1])
    if status != 200:
        return "%d %s" % (status, (rest + s.recv(65536)).decode().strip())
    s.sendall(b"GET /who HTTP/1.0\r\nHost: tunnel\r\n\r\n")
    reply = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        reply += chunk
    return "200 " + reply.partition(b"\r\n\r\n")[2].decode().strip()

def direct(target):
    host, port = target.rsplit(":", 1)
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=3).close()
        return "connected"
    except OSError as e:
        return "error %s" % e

out = {}
for arg in sys.argv[1:]:
    kind, _, target = arg.partition("=")
    out[arg] = {"get": get, "connect": connect, "direct": direct}[kind](target)
print(json.dumps(out))
EOF"""


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    require(request.param)
    return request.param


@pytest.fixture
def open_box(tmp_path: Path) -> Iterator[Callable[..., Sandbox]]:
    """Call with (mode, policy) to open a sandbox on a fresh repository, closed at teardown."""
    opened: list[Sandbox] = []

    def factory(mode: str, policy: EgressPolicy) -> Sandbox:
        workspace = make_repo(tmp_path / f"ws{len(opened)}", {"README.md": "egress\n"})
        spec = SandboxSpec(workspace=workspace, image=IMAGE, memory_mb=512, pids=256, cpus=1.0, name="egress")
        box = open_sandbox(mode, spec, network=policy)
        opened.append(box)
        return box

    yield factory
    for box in opened:
        box.close()


def probe(box: Sandbox, *targets: str) -> dict[str, str]:
    """Run the probe in the sandbox: {target: "STATUS body"} or "error ..."/"connected" for `direct=`."""
    result = box.run(PROBE.replace("{targets}", " ".join(f"'{t}'" for t in targets)), timeout=90)
    assert result.exit_code == 0, result.output
    return json.loads(result.output.strip().splitlines()[-1])


def host_reaches(url: str) -> str:
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(url, timeout=10) as r:
        return r.read().decode().strip()


def test_the_fake_internet_answers_the_host(internet: Internet) -> None:  # noqa: F811
    """Everything the sandboxes are refused is there: a refusal is the policy, not a broken setup."""
    assert host_reaches(f"http://{internet.public}:{internet.port}/who") == "internet"
    assert host_reaches(f"http://{internet.private}:{internet.port}/who") == "internet"
    assert host_reaches(f"http://127.0.0.1:{internet.loopback_port}/") == "host-loopback"
    assert host_reaches(f"http://{HOST_PUBLIC}:{internet.own_port}/") == "host-own"


def test_setup_and_network_true_reach_the_internet_but_never_the_host_or_private_ranges(
    backend: str, internet: Internet, open_box: Callable[..., Sandbox]  # noqa: F811
) -> None:
    loop, own, pub, priv = (internet.loopback_port, internet.own_port, f"{internet.public}:{internet.port}",
                            f"{internet.private}:{internet.port}")
    refused = {
        f"get=http://127.0.0.1:{loop}/": "is loopback",
        f"get=http://localhost:{loop}/": "is loopback",
        f"get=http://[::1]:{loop}/": "is loopback",
        f"get=http://[::ffff:127.0.0.1]:{loop}/": "is loopback",
        f"get=http://0.0.0.0:{loop}/": "'this network'",
        f"get=http://{HOST_PUBLIC}:{own}/": "an address of the machine running the sandbox",
        f"connect={HOST_PUBLIC}:{own}": "an address of the machine running the sandbox",
        f"get=http://{HOST_PRIVATE}:{internet.port}/": "an address of the machine running the sandbox",
        f"get=http://{priv}/who": "is a private range (10.0.0.0/8)",
        f"connect={priv}": "is a private range (10.0.0.0/8)",
        f"connect=[::ffff:{internet.private}]:{internet.port}": "is a private range (10.0.0.0/8)",
        "get=http://169.254.169.254/latest/meta-data/": "link-local (cloud metadata)",
        "get=http://100.100.100.200/": "carrier-grade NAT",
        "get=http://[fd00::1]/": "unique local",
    }
    box = open_box(backend, INTERNET)  # the setup phase
    assert box.run("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '").output.split() == ["lo"]
    for phase in ("setup", "agent with network: true"):
        seen = probe(box, f"get=http://{pub}/who", f"connect={pub}", *refused,
                     f"direct={pub}", f"direct=127.0.0.1:{loop}", f"direct={internet.private}:{internet.port}")
        assert seen[f"get=http://{pub}/who"] == "200 internet", phase
        assert seen[f"connect={pub}"] == "200 internet", phase
        for target, why in refused.items():
            assert seen[target].startswith("403 decode-bot's egress proxy blocked"), (phase, target, seen[target])
            assert why in seen[target], (phase, target, seen[target])
        for target in (f"direct={pub}", f"direct=127.0.0.1:{loop}", f"direct={internet.private}:{internet.port}"):
            assert seen[target].startswith("error"), (phase, target, "a connection around the proxy")
        blocked = box.blocked()
        assert blocked[f"127.0.0.1:{loop}"] == 1 and blocked[f"{HOST_PUBLIC}:{own}"] == 2
        assert blocked[priv] == 2 and blocked["169.254.169.254:80"] == 1 and pub not in blocked
        box.set_network(INTERNET)  # what the pipeline does before the agent: agentd restarts, counts reset
        assert box.blocked() == {}


def test_allow_cidrs_opens_a_private_range(
    backend: str, internet: Internet, open_box: Callable[..., Sandbox]  # noqa: F811
) -> None:
    pub, priv = f"{internet.public}:{internet.port}", f"{internet.private}:{internet.port}"
    box = open_box(backend, EgressPolicy(internet=True, allow_cidrs=("10.77.0.0/24",)))
    host_in_range = f"get=http://{HOST_PRIVATE}:{internet.port}/"
    seen = probe(box, f"get=http://{priv}/who", f"connect={priv}", f"get=http://{pub}/who",
                 f"get=http://127.0.0.1:{internet.loopback_port}/", host_in_range)
    assert seen[f"get=http://{priv}/who"] == seen[f"connect={priv}"] == "200 internet"
    assert seen[f"get=http://{pub}/who"] == "200 internet"
    assert seen[f"get=http://127.0.0.1:{internet.loopback_port}/"].startswith("403"), "only the range listed"
    assert "machine running the sandbox" in seen[host_in_range], "the host's own address inside an allowed range"
    everything = EgressPolicy(internet=True, allow_cidrs=("0.0.0.0/0", "::/0"))
    box.set_network(everything)
    seen = probe(box, f"get=http://127.0.0.1:{internet.loopback_port}/", "get=http://169.254.169.254/",
                 f"get=http://{HOST_PUBLIC}:{internet.own_port}/")
    assert all(answer.startswith("403") and "never reachable" in answer for answer in seen.values()), seen
    box.set_network(EgressPolicy(allow_cidrs=("10.77.0.0/24",)))  # network: false, allow_cidrs
    seen = probe(box, f"get=http://{priv}/who", f"get=http://{pub}/who")
    assert seen[f"get=http://{priv}/who"] == "200 internet"
    assert seen[f"get=http://{pub}/who"].startswith("403") and "network is off for the agent" in seen[
        f"get=http://{pub}/who"]


def test_allow_domains_limits_the_agent_to_those_names(
    backend: str, internet: Internet, open_box: Callable[..., Sandbox]  # noqa: F811
) -> None:
    pub = f"{internet.public}:{internet.port}"
    box = open_box(backend, EgressPolicy(allow_domains=("*.example.test",)))
    seen = probe(box, "get=http://blocked.invalid:8080/", "connect=blocked.invalid:443", f"get=http://{pub}/who",
                 "get=http://example.test/")
    assert "blocked.invalid is not in allow_domains: add it to allow_domains in .github/decode.yml" in seen[
        "get=http://blocked.invalid:8080/"]
    assert seen["connect=blocked.invalid:443"].startswith("403")
    assert "allow_domains lets only names through" in seen[f"get=http://{pub}/who"]
    assert seen["get=http://example.test/"].startswith("403"), "*.example.test does not cover example.test"
    assert box.blocked() == {"blocked.invalid:8080": 1, "blocked.invalid:443": 1, pub: 1, "example.test:80": 1}
    box.set_network(EgressPolicy(allow_domains=("*.example.test",), allow_cidrs=(f"{internet.public}/32",)))
    assert probe(box, f"get=http://{pub}/who")[f"get=http://{pub}/who"] == "200 internet"
    assert box.blocked() == {}


def test_with_the_network_off_nothing_gets_out_and_every_attempt_is_counted(
    backend: str, internet: Internet, open_box: Callable[..., Sandbox]  # noqa: F811
) -> None:
    pub = f"{internet.public}:{internet.port}"
    box = open_box(backend, EgressPolicy())  # network: false, the agent's default
    seen = probe(box, f"get=http://{pub}/who", f"connect={pub}", f"direct={pub}")
    assert seen[f"get=http://{pub}/who"] == (
        f"403 decode-bot's egress proxy blocked {pub}: network is off for the agent: "
        "set network: true or allow_domains in .github/decode.yml")
    assert seen[f"connect={pub}"].startswith("403") and seen[f"direct={pub}"].startswith("error")
    assert box.blocked() == {pub: 2}


def test_without_the_proxy_nothing_resolves_or_routes(backend: str, open_box: Callable[..., Sandbox]) -> None:
    """No route and no DNS even with the internet allowed: only proxy-aware clients get anywhere."""
    box = open_box(backend, INTERNET)
    out = box.run("python3 -c \"import socket; socket.getaddrinfo('example.com', 80)\" 2>&1 | tail -n 1; "
                  "tail -n +2 /proc/net/route | wc -l").output
    assert "gaierror" in out and out.split()[-1] == "0", out
    shared = ["agentd.pyz", "proxy.sock"] if backend == "docker" else ["proxy.sock"]  # docker: agentd's zipapp
    assert box.run("ls -A /run/decode-egress").output.split() == shared, "only the proxy's socket (and agentd) is shared"
