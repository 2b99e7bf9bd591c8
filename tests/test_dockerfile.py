"""The app image: built by docker/build-app-image.sh from the local base, run as a container.

The engine here has no bridge network (`--bridge=none`), so the server container
runs with `--network host` on a free port of 127.0.0.1. Locally a missing engine
skips these tests; under CI it fails them (`require`, as for the sandboxes).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import time
import urllib.error
import uuid
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sandbox.conftest import require

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parent.parent
TAG = "decode-bot:test"
LABEL = "decode.test=dockerfile"
# Enough for `decode serve` to start; nothing here talks to GitHub.
SERVE_ENV = {"GITHUB_WEBHOOK_SECRET": "test-secret", "GITHUB_TOKEN": "test-token"}


def docker(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def image() -> str:
    """The app image, built once per test session (seconds when the layer cache is warm)."""
    require("docker")
    res = subprocess.run([str(ROOT / "docker" / "build-app-image.sh"), "--tag", TAG], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, f"docker/build-app-image.sh failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return TAG


@pytest.fixture(scope="module")
def config(image: str) -> dict:
    res = docker("image", "inspect", "--format", "{{json .Config}}", image)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def container() -> Iterator[list[str]]:
    """Names of containers a test started; removed (with their volumes) at teardown."""
    started: list[str] = []
    yield started
    for cid in started:
        docker("rm", "-f", "-v", cid)


def env_args(env: dict[str, str]) -> list[str]:
    return [a for key, value in env.items() for a in ("--env", f"{key}={value}")]


def test_runs_as_non_root_user(image: str, config: dict) -> None:
    assert config["User"] == "decode"
    res = docker("run", "--rm", "--network", "none", image, "sh", "-c", "id -u; id -g")
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["10001", "10001"]


def test_declares_healthcheck_port_and_command(config: dict) -> None:
    test = config["Healthcheck"]["Test"]
    assert test[0] == "CMD" and "/healthz" in " ".join(test)
    assert "8080/tcp" in config["ExposedPorts"]
    assert config["Cmd"] == ["decode", "serve", "--host", "0.0.0.0", "--port", "8080"]
    env = dict(e.split("=", 1) for e in config["Env"])
    assert env["DECODE_DATA_DIR"] == "/data" and "/data" in config["Volumes"]


def test_holds_package_git_and_writable_data_dir(image: str) -> None:
    script = ("set -e; python -c 'import bot, flask, anthropic, github'; decode --help >/dev/null; "
              "git --version; bwrap --version; touch /data/probe; stat -c %U /data")
    res = docker("run", "--rm", "--network", "none", image, "sh", "-c", script)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.split()[-1] == "decode"


def test_healthz_answers_200_from_a_container(image: str, config: dict, container: list[str], fake_github,
                                             fake_anthropic) -> None:
    port = free_port()
    github = {"GITHUB_TOKEN": fake_github.add_token("octocat"), "GITHUB_API_URL": fake_github.api_url}
    model = {"ANTHROPIC_API_KEY": fake_anthropic.api_key, "ANTHROPIC_BASE_URL": fake_anthropic.url}  # /healthz checks it
    res = docker("run", "-d", "--label", LABEL, "--network", "host", *env_args({**SERVE_ENV, **github, **model}),
                 image, "decode", "serve", "--host", "127.0.0.1", "--port", str(port))
    assert res.returncode == 0, res.stderr
    cid = res.stdout.strip()
    container.append(cid)
    status, deadline = None, time.monotonic() + 45
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as answer:
                status = answer.status
                break
        except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
            status = e
        if docker("inspect", "--format", "{{.State.Running}}", cid).stdout.strip() != "true":
            break
        time.sleep(0.3)
    logs = docker("logs", cid)
    assert status == 200, f"/healthz: {status}\n{logs.stdout[-2000:]}{logs.stderr[-2000:]}"
    # The image's own HEALTHCHECK command, pointed at the port this server listens on.
    check = [part.replace(":8080/", f":{port}/") for part in config["Healthcheck"]["Test"][1:]]
    res = docker("exec", cid, *check)
    assert res.returncode == 0, res.stderr


def test_refuses_to_start_without_webhook_secret(image: str) -> None:
    env = {k: v for k, v in SERVE_ENV.items() if k != "GITHUB_WEBHOOK_SECRET"}
    res = docker("run", "--rm", "--label", LABEL, "--network", "none", *env_args(env), image)
    assert res.returncode != 0
    assert "GITHUB_WEBHOOK_SECRET" in res.stderr + res.stdout


def run_line(page: Path) -> list[str]:
    """The `docker run` command of a page's code block, as the shell splits it."""
    match = re.search(r"^ +(docker run (?:.*\\\n)*.*)$", page.read_text(), re.M)
    assert match, f"no docker run line in {page.name}"
    return shlex.split(match.group(1).replace("\\\n", " "))


def test_the_readmes_docker_run_line_starts_setup_mode_and_its_sandbox_can_run(image: str,
                                                                              container: list[str]) -> None:
    """As written, but for the engine here: no bridge network (`-p` becomes `--network none`, the link is opened
    from inside), a volume and a name of the test's own, and the image the test built."""
    args = run_line(ROOT / "README.md")
    required = run_line(ROOT / "docs" / "deploy.md")
    options = {required[i + 1] for i, a in enumerate(required) if a == "--security-opt"}
    assert options and options <= {args[i + 1] for i, a in enumerate(args) if a == "--security-opt"}
    own = f"decode-readme-{uuid.uuid4().hex[:8]}"
    swap = {"-p": ["--network", "none"], "--name": ["--name", own, "--label", LABEL]}
    command: list[str] = []
    at = 2
    while at < len(args) - 1:  # the image is the last word
        word, value = args[at], args[at + 1] if at + 1 < len(args) else ""
        command += swap.get(word, [word, value.replace("decode-data:", f"{own}:")] if word == "-v" else [word])
        at += 2 if word in swap or word == "-v" else 1
    res = subprocess.run(["docker", "run", *command, image], capture_output=True, text=True, timeout=60,
                         env={"PATH": os.environ["PATH"], "ANTHROPIC_API_KEY": "sk-ant-readme"})
    assert res.returncode == 0, res.stderr
    container.append(own)
    try:
        deadline, logs = time.monotonic() + 45, ""
        while "setup mode" not in logs and time.monotonic() < deadline:
            answer = docker("logs", own)
            logs = answer.stdout + answer.stderr
            time.sleep(0.3)
        link = re.search(r"open (https://decode\.example\.com(/setup\?key=\S+)) to create it", logs)
        assert link, logs
        fetch = ("import sys, urllib.request; a = urllib.request.urlopen(sys.argv[1], timeout=10); "
                 "print(a.status, 'id=\"create\"' in a.read().decode())")
        res = docker("exec", own, "python3", "-c", fetch, "http://127.0.0.1:8080" + link.group(2))
        assert res.stdout.split() == ["200", "True"], res.stdout + res.stderr
        res = docker("exec", own, "bwrap", "--unshare-all", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
                     "true")
        assert res.returncode == 0, f"bwrap cannot run in the container as the README starts it: {res.stderr}"
    finally:
        docker("rm", "-f", "-v", own)
        docker("volume", "rm", "-f", own)
