"""DECODE_MCP_SERVERS: the operator's remote MCP servers, their credentials secrets of the settings."""

import pytest

from bot.config import Settings
from bot.core.errors import ConfigError


def test_the_servers_are_read_and_their_header_values_are_secrets_never_shown():
    settings = Settings.from_env({"DECODE_MCP_SERVERS": '{"docs": {"url": "https://mcp.example.com/mcp", '
                                                        '"headers": {"Authorization": "Bearer op-s3cret"}}}'})
    (docs,) = settings.mcp.servers
    assert (docs.name, docs.url, docs.headers) == ("docs", "https://mcp.example.com/mcp",
                                                   (("Authorization", "Bearer op-s3cret"),))
    assert "Bearer op-s3cret" in settings.secrets() and "op-s3cret" not in repr(settings)
    assert "op-s3cret" not in settings.redactor.redact("said Bearer op-s3cret")


@pytest.mark.parametrize("raw", ["[1]", "{not json", '{"docs": {}}', '{"my docs": {"url": "https://x"}}',
                                 '{"docs": {"url": "file:///etc/passwd"}}'])
def test_a_bad_value_is_one_line_naming_the_fix(raw):
    with pytest.raises(ConfigError) as raised:
        Settings.from_env({"DECODE_MCP_SERVERS": raw})
    message = str(raised.value)
    assert message.startswith("DECODE_MCP_SERVERS is not valid: set it to JSON") and raw not in message
