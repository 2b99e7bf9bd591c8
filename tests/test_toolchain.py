"""The agent's toolchain: what decode.yml's setup installs, the agent's own python3 imports.

The real pipeline (`execute`) on a local repository holding a tiny package, the real anthropic SDK
against the fake Messages API scripting the agent, and a real sandbox of each backend that runs the
host's (local, bwrap) or the image's (docker) toolchain. No network: pip installs from the directory.
Also: decode.yml's `image:` is the container docker runs, and a note under local.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.model.anthropic import AnthropicModel
from bot.run.pipeline import Job, Ran, execute
from bot.sandbox.local import clean_env, host_path
from bot.run.transcript import load_events
from tests.conftest import make_repo
from tests.sandbox.conftest import IMAGE, MODES, require

# The package's build backend is in the tree and uses only the standard library, so that pip builds it
# offline with any interpreter: a setuptools backend needs `wheel` besides setuptools < 70.1, which a
# host's python3 (a pyenv build, say) may not carry.
BACKEND = """\
import base64, hashlib, os, zipfile


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    wheel, info = "decode_probe-0.1-py3-none-any.whl", "decode_probe-0.1.dist-info"
    files = {"decode_probe/__init__.py": open("decode_probe/__init__.py", "rb").read(),
             info + "/METADATA": b"Metadata-Version: 2.1\\nName: decode-probe\\nVersion: 0.1\\n",
             info + "/WHEEL": b"Wheel-Version: 1.0\\nGenerator: probe\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"}
    digest = lambda data: base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record = ["%s,sha256=%s,%d" % (path, digest(data), len(data)) for path, data in files.items()]
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel), "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
        z.writestr(info + "/RECORD", "\\n".join(record + [info + "/RECORD,,"]) + "\\n")
    return wheel
"""
PROBE = {
    "README.md": "# probe\n",
    "probe/pyproject.toml": ('[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n\n'
                             '[project]\nname = "decode-probe"\nversion = "0.1"\n'),
    "probe/backend.py": BACKEND,
    "probe/decode_probe/__init__.py": "VALUE = 42\n",
    ".github/decode.yml": 'setup: ["python3 -m pip install --no-index --no-build-isolation ./probe"]\n',
}
CHECK = ("python3 -c 'import decode_probe, sys; print(decode_probe.VALUE); print(sys.prefix)'; "
         "command -v python3; command -v pip")
HOST_TOOLCHAIN = [m for m in MODES if m.values[0] in ("local", "bwrap", "docker")]


def run_pipeline(fake_anthropic, tmp_path: Path, repo: Path, mode: str, command: str) -> Ran:
    """Run the real pipeline on `repo` in `mode`, the scripted agent running `command` once."""
    fake_anthropic.script([[{"type": "tool_use", "name": "bash", "input": {"command": command}}],
                           [{"type": "text", "text": "Checked."}]])
    settings = fake_anthropic.settings(sandbox_mode=mode, data_dir=tmp_path / "data", sandbox_image=IMAGE)
    job = Job(repo=str(repo), task="Check the toolchain", branch="decode/run-toolchain", run_id="toolchain")
    return execute(job, settings.run, client=AnthropicModel(settings.model, sleep=lambda s: None),
                   progress=lambda line: None)


def events(outcome: Ran, kind: str) -> list[dict]:
    return [e for e in load_events(outcome.transcript_jsonl) if e["type"] == kind]


@pytest.fixture
def host_cleanup(tmp_path: Path) -> Iterator[None]:
    """Under local a root host's writable interpreter takes the install itself: take it out again."""
    yield
    env = clean_env(str(tmp_path), "local", host_path())
    subprocess.run(["python3", "-m", "pip", "uninstall", "-y", "-q", "decode-probe"], env=env, cwd=tmp_path,
                   capture_output=True, timeout=120)


@pytest.mark.parametrize("mode", HOST_TOOLCHAIN)
def test_what_setup_pip_installs_the_agents_python3_imports(fake_anthropic, tmp_path, mode, host_cleanup):
    require(mode)
    repo = make_repo(tmp_path / "repo", PROBE)
    outcome = run_pipeline(fake_anthropic, tmp_path, repo, mode, CHECK)
    [setup] = events(outcome, "setup")
    assert setup["exit_code"] == 0, setup["output"]
    [result] = events(outcome, "tool_result")
    assert not result["is_error"], result["output"]
    value, prefix, python3, pip = result["output"].splitlines()[:4]
    assert value == "42", result["output"]
    own = os.path.realpath(sys.prefix)
    assert os.path.realpath(prefix) != own, f"the agent's python3 is decode-bot's own ({prefix})"
    for tool in (python3, pip):
        assert tool.startswith("/") and not tool.startswith(sys.prefix + "/"), f"{tool} is decode-bot's venv"


def test_the_repositorys_image_is_the_container_docker_runs(fake_anthropic, tmp_path):
    require("docker")
    tag = "decode-probe:1"
    made = subprocess.run(["docker", "create", IMAGE, "sh", "-c", "echo decode-probe-image > /etc/decode-probe"],
                          capture_output=True, text=True, check=True).stdout.strip()
    try:
        subprocess.run(["docker", "start", "-a", made], capture_output=True, check=True)
        subprocess.run(["docker", "commit", made, tag], capture_output=True, check=True)
        repo = make_repo(tmp_path / "repo", {"README.md": "x\n", ".github/decode.yml": f"image: {tag}\n"})
        outcome = run_pipeline(fake_anthropic, tmp_path, repo, "docker", "cat /etc/decode-probe")
        [result] = events(outcome, "tool_result")
        assert result["output"].splitlines()[0] == "decode-probe-image", result["output"]
        assert not events(outcome, "note")
    finally:
        subprocess.run(["docker", "rm", "-f", made], capture_output=True)
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)


def test_local_ignores_the_image_with_a_note(fake_anthropic, tmp_path):
    repo = make_repo(tmp_path / "repo", {"README.md": "x\n", ".github/decode.yml": "image: decode-probe:2\n"})
    outcome = run_pipeline(fake_anthropic, tmp_path, repo, "local", "echo ran")
    [note] = events(outcome, "note")
    assert note["text"] == (".github/decode.yml names the image decode-probe:2, which only SANDBOX_MODE=docker "
                            "and modal use; the local sandbox runs on the host's toolchain")
    assert events(outcome, "tool_result")[0]["output"].splitlines()[0] == "ran"
