"""decode-bot installed as a user installs it (a wheel built from this tree, not an editable checkout): the
pieces a command needs ship in the package, and the sandbox image is reachable from the installed command:
`decode check` names a missing image with `decode image build`, which runs the shipped build script."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ABSENT = "decode-firstuse-absent:0"  # an image tag of these tests' own, never built


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A new virtualenv holding decode-bot from a wheel built from this tree; its dependencies are the ones
    this interpreter has (a .pth line to its site-packages: no index needed), decode-bot itself only the wheel's."""
    work = tmp_path_factory.mktemp("installed")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check", "--no-deps",
                    "--wheel-dir", str(work / "wheels"), str(ROOT)], check=True, capture_output=True, timeout=600)
    [wheel] = (work / "wheels").glob("decode_bot-*.whl")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    subprocess.run([venv / "bin" / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    "--no-deps", "--no-index", str(wheel)], check=True, capture_output=True, timeout=300)
    where = "import sysconfig; print(sysconfig.get_path('purelib'))"
    site = Path(subprocess.run([venv / "bin" / "python", "-c", where], check=True, capture_output=True,
                               text=True).stdout.strip())
    (site / "dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")  # added to sys.path, after `site`
    return venv


def decode(venv: Path, tmp_path: Path, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {"PATH": f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path / "home"),
            "DECODE_DATA_DIR": str(tmp_path / "data"), **env}
    return subprocess.run([venv / "bin" / "decode", *argv], env=full, cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)


def test_the_wheel_ships_the_image_build_script_and_the_pages(installed, tmp_path):
    where = decode(installed, tmp_path, "--version")
    assert where.returncode == 0, where.stderr
    package = Path(subprocess.run([installed / "bin" / "python", "-c", "import bot; print(bot.__file__)"],
                                  cwd=tmp_path, capture_output=True, text=True, check=True).stdout.strip()).parent
    assert package.is_relative_to(installed), package  # the wheel's copy, not this checkout
    shipped = package / "sandbox" / "image" / "build.sh"
    assert shipped.read_bytes() == (ROOT / "sandbox-image" / "build.sh").read_bytes()
    assert (package / "server" / "templates" / "run.html").is_file() and (package / "py.typed").is_file()
    helped = decode(installed, tmp_path, "image", "build", "--help")
    assert helped.returncode == 0 and "debootstrap" in helped.stdout


@pytest.mark.docker
def test_check_names_a_missing_image_and_the_installed_build_runs(installed, tmp_path):
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=a", "-c", "user.email=a@example.com", "commit", "-q",
                    "--allow-empty", "-m", "start"], check=True)
    res = decode(installed, tmp_path, "check", "--repo", str(repo), SANDBOX_MODE="docker",
                 DECODE_SANDBOX_IMAGE=ABSENT)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert f"build it with `decode image build {ABSENT}`" in res.stderr.strip().splitlines()[-1]
    # The command it names runs the script shipped in the package; here it stops before building (not root, or
    # no debootstrap on this PATH), so no image is made: exit 2 and the line naming the fix.
    built = decode(installed, tmp_path, "image", "build", ABSENT, DECODE_SANDBOX_IMAGE=ABSENT)
    assert built.returncode == 2, built.stdout + built.stderr
    assert built.stderr.splitlines()[0].startswith(f"decode: building the sandbox image {ABSENT} (debootstrap")
    assert built.stderr.strip().splitlines()[-1] in ("build.sh: install debootstrap (apt-get install debootstrap)",
                                                     "build.sh: debootstrap needs root: run it with sudo")
    assert subprocess.run(["docker", "image", "inspect", ABSENT], capture_output=True).returncode != 0
