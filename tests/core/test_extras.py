"""A missing extra's module becomes one line naming the pip command; any other ImportError is a bug and
is not disguised as a missing extra."""

from __future__ import annotations

import pytest

from bot.core.errors import ConfigError
from bot.core.extras import requires_extra


def test_a_module_of_the_extra_names_the_install():
    with pytest.raises(ConfigError) as caught, requires_extra("postgres", "DECODE_DATABASE_URL"):
        raise ModuleNotFoundError("No module named 'psycopg.pq'", name="psycopg.pq")
    assert str(caught.value) == ("DECODE_DATABASE_URL needs psycopg, which is not installed: "
                                 "pip install 'decode-bot[postgres] @ git+https://github.com/decode-bot/decode-bot'")


def test_another_import_error_passes_unchanged():
    with pytest.raises(ImportError, match="cannot import name 'Store'"), requires_extra("server", "decode serve"):
        raise ImportError("cannot import name 'Store' from 'bot.jobs.sqlite'", name="bot.jobs.sqlite")
