"""MCP tools as the model sees them (bot/agent/mcp.py): names within the API's rule and unique, results as
text and the images the model takes."""

import re

from mcp.types import CallToolResult

from bot.agent.mcp import observation, offered_name, unique

API_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # the Messages API's rule for a tool's name


def test_names_are_sanitised_to_the_api_rule_and_long_ones_stay_apart():
    assert offered_name("git", "git_status") == "mcp__git__git_status"
    assert offered_name("docs", "search.v2 (beta)") == "mcp__docs__search_v2__beta_"
    long_a, long_b = offered_name("a-server", "x" * 80 + "a"), offered_name("a-server", "x" * 80 + "b")
    assert API_NAME.match(long_a) and API_NAME.match(long_b) and long_a != long_b and len(long_a) == 64


def test_a_name_taken_twice_gets_a_number_and_stays_within_64():
    taken = {"mcp__docs__search_v2", "mcp__docs__search_v2_2"}
    assert unique("mcp__docs__search_v2", taken) == "mcp__docs__search_v2_3"
    full = "m" * 64
    assert unique(full, {full}) == "m" * 62 + "_2"


def test_a_result_is_its_text_and_the_images_the_model_takes():
    result = CallToolResult.model_validate({"content": [
        {"type": "text", "text": "first"},
        {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
        {"type": "image", "data": "AAAA", "mimeType": "image/tiff"},
        {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
        {"type": "resource_link", "uri": "file:///notes.md", "name": "notes"},
    ], "isError": True})
    obs = observation(result)
    assert obs.is_error and obs.text.splitlines()[0] == "first" and "[resource file:///notes.md]" in obs.text
    assert obs.text.count("content the model cannot take was left out") == 2
    assert obs.images == ({"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                       "data": "iVBORw0KGgo="}},)
    assert obs.content()[0] == {"type": "text", "text": obs.text} and obs.content()[1] == obs.images[0]


def test_structured_content_alone_is_shown_as_json():
    obs = observation(CallToolResult.model_validate({"content": [], "structuredContent": {"n": 1}}))
    assert obs.text == '{"n": 1}' and not obs.is_error
