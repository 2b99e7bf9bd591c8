import pytest

from bot.errors import ConfigError
from bot.repo_config import RepoConfig, load_repo_config, parse_repo_config


def test_no_file_means_defaults(tmp_path):
    assert load_repo_config(tmp_path) == RepoConfig()


def test_setup_and_network_are_read(tmp_path):
    (tmp_path / ".github").mkdir()
    (tmp_path / ".github/decode.yml").write_text("setup:\n  - pip install -e .\n  - make deps\nnetwork: true\n")
    assert load_repo_config(tmp_path) == RepoConfig(setup=("pip install -e .", "make deps"), network=True)


def test_a_single_setup_command_string_is_accepted():
    assert parse_repo_config({"setup": "make deps"}).setup == ("make deps",)


@pytest.mark.parametrize(
    "data, key",
    [
        ({"stup": ["x"]}, "'stup'"),
        ({"network": "yes"}, "'network'"),
        ({"setup": [1, 2]}, "'setup'"),
        ({"setup_timeout": -1}, "'setup_timeout'"),
        (["setup"], "mapping"),
    ],
)
def test_invalid_config_names_the_key(data, key):
    with pytest.raises(ConfigError) as e:
        parse_repo_config(data)
    assert key in str(e.value) and ".github/decode.yml" in str(e.value)


def test_invalid_yaml_is_a_clear_error(tmp_path):
    (tmp_path / ".github").mkdir()
    (tmp_path / ".github/decode.yml").write_text("setup: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_repo_config(tmp_path)


def test_modal_keys_are_validated():
    config = parse_repo_config({"allow_cidrs": ["10.0.0.0/8", "192.168.1.7"], "gpu": "H200:4"})
    assert config.allow_cidrs == ("10.0.0.0/8", "192.168.1.7") and config.gpu == "H200:4"
    with pytest.raises(ConfigError, match="'allow_cidrs' has 'intranet'"):
        parse_repo_config({"allow_cidrs": ["intranet"]})
    with pytest.raises(ConfigError, match="'gpu'"):
        parse_repo_config({"gpu": 4})
