"""decode.yml's `verify` and `verify_rounds`: what is accepted, and errors that name the key and say what
it should hold."""

from __future__ import annotations

import pytest

from bot.core.errors import ConfigError
from bot.run.repo_config import RepoConfig, parse_repo_config


def test_defaults_verify_nothing_with_two_rounds():
    assert (RepoConfig().verify, RepoConfig().verify_rounds) == ((), 2)
    assert parse_repo_config({"setup": ["make deps"]}).verify == ()


def test_one_command_or_a_list_and_the_rounds_are_read():
    assert parse_repo_config({"verify": "pytest -q"}).verify == ("pytest -q",)
    config = parse_repo_config({"verify": ["ruff check .", "pytest -q"], "verify_rounds": 5})
    assert (config.verify, config.verify_rounds) == (("ruff check .", "pytest -q"), 5)


@pytest.mark.parametrize("verify", [{"run": "pytest"}, ["pytest", 3], [""], ["  "], 7, True, [["pytest"]]])
def test_verify_must_be_commands(verify):
    with pytest.raises(ConfigError, match=r"\.github/decode\.yml: 'verify' must be a command or a list of commands"):
        parse_repo_config({"verify": verify})


@pytest.mark.parametrize("rounds", [0, -1, 6, 100, 2.5, "2", True, None, [2]])
def test_verify_rounds_must_be_a_whole_number_from_one_to_five(rounds):
    with pytest.raises(ConfigError) as caught:
        parse_repo_config({"verify": "pytest -q", "verify_rounds": rounds})
    message = str(caught.value)
    assert message.startswith(".github/decode.yml: 'verify_rounds' must be a whole number from 1 to 5")
    assert f"not {rounds!r}" in message


def test_a_long_bad_value_is_cut_in_the_message():
    with pytest.raises(ConfigError) as caught:
        parse_repo_config({"verify_rounds": "x" * 500})
    assert len(str(caught.value)) < 300 and str(caught.value).endswith("...")


def test_a_misspelt_key_names_the_real_ones():
    with pytest.raises(ConfigError, match=r"unknown key 'verify_round'.*verify, verify_rounds"):
        parse_repo_config({"verify_round": 2})
