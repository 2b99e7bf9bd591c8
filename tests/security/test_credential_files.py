"""The credentials files a provider's variables name (AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE,
AWS_WEB_IDENTITY_TOKEN_FILE, GOOGLE_APPLICATION_CREDENTIALS, ...) are hidden from the sandbox wherever they are,
and what they hold is redacted like a secret value where a sandbox can read them anyway (`local`).

`decode run` as a user runs it, a scripted agent that `cat`s each file and prints one value on its own; the
files sit in a host directory bwrap shows read-only (not under /tmp, HOME or the data dir, hidden already)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import make_repo
from tests.sandbox.conftest import require
from tests.support.cli import decode_run

SECRET_KEY = "wJalrXUtnFEMIK7MDENGbPxRfiCYsecretKEYbytes"
ACCESS_KEY = "AKIAIOSFODNN7ACCESSID"
WEB_TOKEN = "webidentitytokenBYTES0123456789abcdef"
GOOGLE_KEY_ID = "0123456789abcdefGOOGLEkeyIDbytes"
SECRETS = (SECRET_KEY, ACCESS_KEY, WEB_TOKEN, GOOGLE_KEY_ID)


@pytest.fixture
def credential_files(tmp_path: Path) -> Iterator[dict[str, Path]]:
    """A provider's credentials files, each named by its variable, beside a file that is not one."""
    base = Path("/opt/decode-tests") / f"creds-{os.getpid()}-{tmp_path.name}"
    base.mkdir(parents=True)
    files = {"AWS_SHARED_CREDENTIALS_FILE": base / "credentials", "AWS_CONFIG_FILE": base / "config",
             "AWS_WEB_IDENTITY_TOKEN_FILE": base / "token", "GOOGLE_APPLICATION_CREDENTIALS": base / "sa.json"}
    files["AWS_SHARED_CREDENTIALS_FILE"].write_text(
        f"[default]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {SECRET_KEY}\n")
    files["AWS_CONFIG_FILE"].write_text(f"[default]\nregion = eu-west-1\naws_secret_access_key={SECRET_KEY}\n")
    files["AWS_WEB_IDENTITY_TOKEN_FILE"].write_text(WEB_TOKEN)
    files["GOOGLE_APPLICATION_CREDENTIALS"].write_text(json.dumps(
        {"type": "service_account", "private_key_id": GOOGLE_KEY_ID, "token_uri": "https://oauth2.example/token"}))
    (base / "readme.txt").write_text("VISIBLEBYTES\n")
    yield files
    shutil.rmtree(base)


def steal(fake, files: dict[str, Path]) -> None:
    """The agent: `cat` every file, then print one value of the shared credentials file on its own."""
    base = files["AWS_CONFIG_FILE"].parent
    shared = files["AWS_SHARED_CREDENTIALS_FILE"]
    fake.script([
        [{"type": "tool_use", "name": "bash", "input": {"command": f"cat {' '.join(map(str, files.values()))} "
                                                                   f"{base}/readme.txt; echo"}}],
        [{"type": "tool_use", "name": "bash", "input": {"command": f"awk '/secret/ {{print \"v:\" $3}}' {shared}"}}],
        [{"type": "text", "text": "Done."}],
    ])


def seen(fake, tmp_path: Path) -> str:
    """Everything the run kept or sent: the transcript and every request the model got."""
    [run] = (tmp_path / "data" / "runs").iterdir()
    return (run / "transcript.jsonl").read_text() + json.dumps([r.body for r in fake.requests])


@pytest.mark.bwrap
def test_credentials_files_outside_the_hidden_directories_are_hidden_from_bwrap(fake_anthropic, tmp_path,
                                                                                credential_files):
    require("bwrap")
    steal(fake_anthropic, credential_files)
    res = decode_run(fake_anthropic, tmp_path, make_repo(tmp_path / "repo", {"README.md": "# r\n"}), "look",
                     "bwrap", **{var: str(path) for var, path in credential_files.items()})
    assert res.returncode == 0, res.stderr
    text = seen(fake_anthropic, tmp_path)
    assert "VISIBLEBYTES" in text, "the directory is shown; only the credentials files are hidden"
    assert not [s for s in SECRETS if s in text]
    assert "eu-west-1" not in text, "the file is not there at all, not merely redacted"


def test_what_credentials_files_hold_is_redacted_where_the_sandbox_reads_them(fake_anthropic, tmp_path,
                                                                              credential_files):
    steal(fake_anthropic, credential_files)
    res = decode_run(fake_anthropic, tmp_path, make_repo(tmp_path / "repo", {"README.md": "# r\n"}), "look",
                     "local", **{var: str(path) for var, path in credential_files.items()})
    assert res.returncode == 0, res.stderr
    text = seen(fake_anthropic, tmp_path)
    assert "VISIBLEBYTES" in text and "v:[REDACTED:secret]" in text, "read, and the lone value redacted too"
    assert not [s for s in SECRETS if s in text]
