"""action.yml's install step on a new runner (empty caches): uv, pinned, installs the core dependencies at
the versions of action/constraints.txt and none of the server, PostgreSQL or Modal extras.

Set DECODE_TEST_INSTALL_SECONDS (e.g. 8) to also hold the step to that many seconds; it needs the package
index and a machine not busy with other work, so it is off by default."""

from __future__ import annotations

import json
import os
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from tests.support.action_install import CONSTRAINTS, ROOT, run_install_step

NOT_FOR_THE_ACTION = {"modal", "grpcio", "psycopg", "psycopg-binary", "flask", "waitress", "prometheus-client",
                      "markdown-it-py", "nh3"}


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins() -> dict[str, str]:
    """action/constraints.txt as {normalized name: version}."""
    found = re.findall(r"^([A-Za-z0-9_.-]+)==([^\s;]+)", CONSTRAINTS.read_text(), re.MULTILINE)
    return {normalized(name): version for name, version in found}


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[float, Path]:
    return run_install_step(tmp_path_factory.mktemp("action-install"))


def test_a_fresh_install_is_the_core_at_its_pinned_versions_and_runs(installed):
    took, venv = installed
    listing = subprocess.run([str(venv / "bin" / "python"), "-I", "-c", "import importlib.metadata as m, json; "
                              "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))"],
                             capture_output=True, text=True, check=True)
    versions = {normalized(name): v for name, v in json.loads(listing.stdout).items()}
    versions.pop("decode-bot", None)  # the checkout's own metadata, when a build left some there
    assert not NOT_FOR_THE_ACTION & versions.keys()
    assert versions == {name: pins()[name] for name in versions}
    decode = [str(venv / "bin" / "python"), "-m", "bot.cli"]  # how action.yml's run step starts it
    where = subprocess.run([*decode[:1], "-c", "import bot; print(bot.__file__)"], capture_output=True, text=True)
    assert where.stdout.strip() == str(ROOT / "bot" / "__init__.py"), "decode-bot runs from the action's checkout"
    assert subprocess.run([*decode, "--help"], capture_output=True).returncode == 0
    serve = subprocess.run([*decode, "serve"], capture_output=True, text=True, timeout=60,
                           env={"PATH": os.environ["PATH"], "HOME": str(venv.parent), "GITHUB_TOKEN": "t",
                                "GITHUB_WEBHOOK_SECRET": "s", "DECODE_DATA_DIR": str(venv.parent / "data")})
    assert serve.returncode == 2 and serve.stderr.strip().splitlines() == [
        "decode: decode serve needs flask, which is not installed: pip install 'decode-bot[server] @ "
        "git+https://github.com/decode-bot/decode-bot'"]
    if limit := os.environ.get("DECODE_TEST_INSTALL_SECONDS"):
        assert took < float(limit), f"the install step took {took:.1f} s, over {limit} s"


def test_the_constraints_pin_every_core_dependency_and_no_extra_the_action_does_not_use():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {normalized(re.match(r"[A-Za-z0-9_.-]+", d).group()) for d in project["dependencies"]}
    assert core <= pins().keys()
    assert not NOT_FOR_THE_ACTION & pins().keys()
