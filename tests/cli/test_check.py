"""`decode check` (bot/cli/check.py) through the real console script: the settings and a `.github/decode.yml`
(`--file`, a local repository's working tree, or GitHub's default branch) are valid (exit 0, one line per
topic of what a run would do) or one line names the fix (exit 2). It lints without an API key. Nothing is
cloned, started or sent to a model."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import git, make_repo
from tests.sandbox.conftest import IMAGE
from tests.support.cli import DECODE, EXAMPLE

FULL = f"""\
setup: [pip install -e ., make tools]
setup_timeout: 300
image: {IMAGE}
allow_domains: [packages.example.com]
allow_cidrs: [10.0.0.0/8]
verify: python -m unittest -q
verify_rounds: 3
setup_cache_key: [requirements.lock]
ci_fix: {{rounds: 2}}
thinking: 20000
review: true
"""


def decode_check(tmp_path: Path, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`decode check ARGV` as a user runs it, with an API key, under `env`."""
    full = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), "PYTHONPATH": str(EXAMPLE.parents[1]),
            "ANTHROPIC_API_KEY": "sk-ant-check", "DECODE_DATA_DIR": str(tmp_path / "data"), **env}
    return subprocess.run([DECODE, "check", *argv], env=full, capture_output=True, text=True, timeout=60)


def lines(stdout: str) -> dict[str, str]:
    return dict(line.split(": ", 1) for line in stdout.splitlines())


@pytest.mark.docker
def test_says_what_a_run_would_do(tmp_path):
    repo = make_repo(tmp_path / "repo", {"a.py": "", ".github/decode.yml": FULL})
    res = decode_check(tmp_path, "--repo", str(repo), SANDBOX_MODE="docker", DECODE_MAX_TURNS="12",
                       DECODE_ALLOW_CIDRS_MAX="10.0.0.0/8")
    assert res.returncode == 0, res.stderr
    said = lines(res.stdout)
    assert said["repository"].startswith(f"{repo} at main ") and said["repository"].endswith("valid")
    assert said["sandbox"] == f"docker, image {IMAGE} (image: in .github/decode.yml)"
    assert said["setup"].startswith("2 commands, each up to 300 s") and "pip install -e .; make tools" in said["setup"]
    assert said["network (setup)"] == "public HTTP(S) through the egress proxy; private ranges 10.0.0.0/8"
    assert said["network (agent)"].startswith("only packages.example.com through the egress proxy")
    assert said["verify"] == "python -m unittest -q, a failure goes back to the agent up to 3 times"
    assert said["setup cache"].startswith("on, keyed on requirements.lock")
    assert said["self-review"].startswith("a read-only pass reviews the diff")
    assert said["budget"].startswith("12 turns, 5,000,000 tokens, $10, 60 minutes")
    assert "ci_fix: up to 2 fix runs" in said["triggers"]
    assert said["thinking"] == "a budget of 20,000 tokens where the model supports it (thinking: in .github/decode.yml)"
    assert said["ok"] == "a run would start with these settings"


def test_local_sandbox_ignores_the_image_and_caches_nothing(tmp_path):
    repo = make_repo(tmp_path / "repo", {"a.py": "", ".github/decode.yml": FULL})
    res = decode_check(tmp_path, "--repo", str(repo), SANDBOX_MODE="local", DECODE_ALLOW_CIDRS_MAX="10.0.0.0/8")
    assert res.returncode == 0, res.stderr
    said = lines(res.stdout)
    assert said["sandbox"] == f"local, on the host's toolchain; .github/decode.yml's image {IMAGE} is ignored (no " \
                              "isolation: for trusted input only, a fork's PR is refused)"
    assert said["network"] == "the host's own, in every phase (this sandbox enforces no egress policy)"
    assert said["setup cache"].startswith("off: SANDBOX_MODE=local does not cache")


def test_allow_cidrs_beyond_the_operators_ceiling_is_one_line_and_exit_2(tmp_path):
    repo = make_repo(tmp_path / "repo", {"a.py": "", ".github/decode.yml": FULL})
    for ceiling in ({}, {"DECODE_ALLOW_CIDRS_MAX": "10.20.0.0/16"}):
        res = decode_check(tmp_path, "--repo", str(repo), SANDBOX_MODE="bwrap", **ceiling)
        assert res.returncode == 2 and res.stdout == "", res.stderr
        [line] = res.stderr.strip().splitlines()
        assert line.startswith("decode: .github/decode.yml: allow_cidrs lists 10.0.0.0/8, which reaches 10.0.0.0/8: "
                               "the operator's DECODE_ALLOW_CIDRS_MAX (")


def test_lints_the_working_tree_file_without_a_key(tmp_path):
    repo = make_repo(tmp_path / "repo", {"a.py": ""})
    (repo / ".github").mkdir()
    (repo / ".github/decode.yml").write_text("bogus: 1\n")  # the edit being made, not yet committed
    res = decode_check(tmp_path, "--repo", str(repo), SANDBOX_MODE="bwrap", ANTHROPIC_API_KEY="")
    assert res.returncode == 2 and res.stdout == "", res.stderr
    assert res.stderr.strip() == ("decode: .github/decode.yml: unknown key 'bogus'; the keys are setup, network, "
                                  "setup_timeout, allow_cidrs, allow_domains, allow_workflow_changes, gpu, image, "
                                  "verify, verify_rounds, review_trigger, ci_fix, setup_cache_key, thinking, "
                                  "allowed_bots, review, mcp, attempts")
    (repo / ".github/decode.yml").write_text("verify: make test\n")
    res = decode_check(tmp_path, "--repo", str(repo), SANDBOX_MODE="bwrap", ANTHROPIC_API_KEY="")
    assert res.returncode == 0, res.stderr
    said = lines(res.stdout)
    assert said["model"].endswith("not checked: ANTHROPIC_API_KEY is not set, and a run needs it (or "
                                  "DECODE_MODEL=scripted:FILE to replay a recorded session)")
    assert said["repository"].startswith(f"{repo} at main ") and said["repository"].endswith(
        " (working tree); .github/decode.yml: valid")
    assert said["verify"].startswith("make test")
    assert said["note"].startswith("the working tree's .github/decode.yml is not the one committed at main ")
    assert said["ok"] == "the settings and decode.yml are valid; a run needs ANTHROPIC_API_KEY too"
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "config")
    res = decode_check(tmp_path, "--repo", str(repo), SANDBOX_MODE="bwrap")
    assert res.returncode == 0 and "note" not in lines(res.stdout), res.stdout
    assert lines(res.stdout)["ok"] == "a run would start with these settings"


@pytest.mark.parametrize("text, line", [
    ("network: true\nverify: [make test]\nnetwork: false\n", "line 3: the key 'network' is given twice (first on "
                                                             "line 1)"),
    ("ci_fix: {rounds: 2, rounds: 5}\n", "line 1: the key 'rounds' is given twice (first on line 1)"),
], ids=["top level", "nested"])
def test_a_key_given_twice_is_refused_naming_it_and_its_line(tmp_path, text, line):
    repo = make_repo(tmp_path / "repo", {"a.py": "", ".github/decode.yml": text})
    res = decode_check(tmp_path, "--repo", str(repo), SANDBOX_MODE="bwrap")
    assert res.returncode == 2 and res.stdout == "", res.stderr
    assert res.stderr.strip() == f"decode: .github/decode.yml (working tree) is not valid YAML: {line}: keep one"


def test_file_checks_that_file_wherever_it_is(tmp_path):
    config = tmp_path / "proposed.yml"
    config.write_text("setup: [make deps]\nnetwork: true\n")
    res = decode_check(tmp_path, "--file", str(config), "--repo", str(tmp_path / "no-repo"), SANDBOX_MODE="bwrap",
                       ANTHROPIC_API_KEY="")
    assert res.returncode == 0, res.stderr
    said = lines(res.stdout)
    assert said["file"] == f"{config}: valid" and said["setup"].endswith("make deps")
    config.write_text("network: yes please\n")
    res = decode_check(tmp_path, "--file", str(config), SANDBOX_MODE="bwrap")
    assert res.returncode == 2 and res.stderr.strip() == f"decode: {config}: 'network' must be true or false, not " \
                                                         "'yes please'"
    res = decode_check(tmp_path, "--file", str(tmp_path / "nowhere.yml"), SANDBOX_MODE="bwrap")
    assert res.returncode == 2
    assert res.stderr.strip() == f"decode: --file {tmp_path / 'nowhere.yml'}: No such file or directory: name the " \
                                 "decode.yml to check"


@pytest.mark.docker
def test_a_missing_sandbox_image_is_reported_with_the_command_that_builds_it(tmp_path):
    repo = make_repo(tmp_path / "repo", {"a.py": ""})
    image = "decode-firstuse-absent:0"  # a tag of this test's own, never built
    res = decode_check(tmp_path, "--repo", str(repo), SANDBOX_MODE="docker", DECODE_SANDBOX_IMAGE=image)
    assert res.returncode == 2, res.stdout
    assert "ok" not in lines(res.stdout)
    assert res.stderr.strip() == (f"decode: the sandbox image {image} (DECODE_SANDBOX_IMAGE, or image: in "
                                  ".github/decode.yml) is not on this Docker engine: build it with `decode image "
                                  f"build {image}` (a few minutes), or docker pull {image} from a registry that has it")


@pytest.mark.parametrize("env, says", [
    ({"SANDBOX_MODE": "vm"}, "SANDBOX_MODE='vm' is not valid: set it to one of local, bwrap, docker, modal"),
    ({"DECODE_MODEL": "scripted:/nowhere.json"}, "DECODE_MODEL=scripted:/nowhere.json: no file /nowhere.json"),
    ({"DECODE_MAX_COST_USD": "free"}, "DECODE_MAX_COST_USD='free' is not valid"),
    ({"DECODE_PROVIDER": "vertex", "ANTHROPIC_VERTEX_PROJECT_ID": "p"}, "DECODE_PROVIDER=vertex: CLOUD_ML_REGION is "
                                                                         "not set"),
    ({"DECODE_PROVIDER": "bedrock", "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKIAX"},
     "DECODE_PROVIDER=bedrock: AWS_SECRET_ACCESS_KEY is not set"),
    ({"DECODE_THINKING": "500"}, "DECODE_THINKING='500' is not valid: set it to on, off or a thinking budget in "
                                 "tokens of at least 1024"),
], ids=["sandbox mode", "missing session", "budget", "vertex without region", "bedrock half a key",
        "thinking"])
def test_a_bad_setting_is_one_line_and_exit_2(tmp_path, env, says):
    repo = make_repo(tmp_path / "repo", {"a.py": ""})
    res = decode_check(tmp_path, "--repo", str(repo), **env)
    assert res.returncode == 2 and res.stdout == "", res.stderr
    [line] = res.stderr.strip().splitlines()
    assert line.startswith("decode: ") and says in line


@pytest.mark.parametrize("value", ["lots", "512", "[on]"])
def test_a_bad_thinking_in_decode_yml_is_one_line_and_exit_2(tmp_path, value):
    repo = make_repo(tmp_path / "repo", {"a.py": "", ".github/decode.yml": f"thinking: {value}\n"})
    res = decode_check(tmp_path, "--repo", str(repo))
    assert res.returncode == 2 and res.stdout == "", res.stderr
    [line] = res.stderr.strip().splitlines()
    assert line.startswith("decode: .github/decode.yml: thinking=") and line.endswith(
        "is not valid: set it to on, off or a thinking budget in tokens of at least 1024 (such as 16000)")


def test_thinking_off_in_decode_yml_overrides_the_setting(tmp_path):
    repo = make_repo(tmp_path / "repo", {"a.py": "", ".github/decode.yml": "thinking: off\n"})
    res = decode_check(tmp_path, "--repo", str(repo), DECODE_THINKING="30000", SANDBOX_MODE="bwrap")
    assert res.returncode == 0, res.stderr
    assert lines(res.stdout)["thinking"] == "off (thinking: in .github/decode.yml)"
    res = decode_check(tmp_path, "--repo", str(make_repo(tmp_path / "plain", {"a.py": ""})), DECODE_THINKING="30000",
                       SANDBOX_MODE="bwrap")
    assert lines(res.stdout)["thinking"] == "a budget of 30,000 tokens where the model supports it (DECODE_THINKING)"


def test_a_scripted_model_needs_no_key(tmp_path):
    repo = make_repo(tmp_path / "repo", {"a.py": ""})
    session = EXAMPLE / "session.json"
    res = decode_check(tmp_path, "--repo", str(repo), ANTHROPIC_API_KEY="", DECODE_MODEL=f"scripted:{session}",
                       SANDBOX_MODE="bwrap")
    assert res.returncode == 0, res.stderr
    assert lines(res.stdout)["model"] == f"replaying {session} (no API key needed)"


def test_a_provider_needs_no_anthropic_key_and_names_its_endpoint(tmp_path):
    repo = make_repo(tmp_path / "repo", {"a.py": ""})
    res = decode_check(tmp_path, "--repo", str(repo), ANTHROPIC_API_KEY="", DECODE_PROVIDER="vertex",
                       CLOUD_ML_REGION="europe-west1", ANTHROPIC_VERTEX_PROJECT_ID="acme", SANDBOX_MODE="bwrap",
                       DECODE_MODEL="claude-sonnet-4-5@20250929")
    assert res.returncode == 0, res.stderr
    assert lines(res.stdout)["model"] == ("claude-sonnet-4-5@20250929 on vertex at https://europe-west1-aiplatform."
                                          "googleapis.com/v1 (the credentials are checked by the first request of a "
                                          "run)")


def test_not_a_repository(tmp_path):
    res = decode_check(tmp_path, "--repo", "no such thing")
    assert res.returncode == 2
    assert res.stderr.strip() == "decode: --repo no such thing: no such path, and not owner/name or a GitHub URL"


def test_a_github_repository_is_read_on_its_default_branch(fake_github, tmp_path):
    fake_github.add_repo("octo", "calendar", {"a.py": "", ".github/decode.yml": "network: true\nverify: make test\n"})
    res = decode_check(tmp_path, "--repo", "octo/calendar", GITHUB_TOKEN=fake_github.token,
                       GITHUB_API_URL=fake_github.api_url, SANDBOX_MODE="bwrap")
    assert res.returncode == 0, res.stderr
    said = lines(res.stdout)
    assert said["repository"] == "octo/calendar at main; .github/decode.yml: valid"
    assert said["network (agent)"] == "public HTTP(S) through the egress proxy (network: true)"
    assert said["verify"].startswith("make test")
    assert fake_github.token not in res.stdout + res.stderr
