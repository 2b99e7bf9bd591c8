"""The toolsets (the six tools of the contract, the read-only set) as the model uses them, run in a real (local)
sandbox."""

import pytest

from bot.agent.tools import DEFAULT_TOOLS, READ_ONLY_TOOLS, Observation, Tool
from bot.sandbox import SandboxSpec, open_sandbox


@pytest.fixture
def sandbox(repo_factory):
    repo = repo_factory({"src/app.py": "def add(a, b):\n    return a - b\n", "notes.txt": "x\nx\n"})
    sb = open_sandbox("local", SandboxSpec(workspace=repo))
    yield sb
    sb.close()


def call(sb, name, **args):
    return DEFAULT_TOOLS.call(sb, name, args, time_left=600)


def test_schemas_match_the_contract():
    params = {t["name"]: set(t["input_schema"]["properties"]) for t in DEFAULT_TOOLS.schemas}
    assert params == {
        "bash": {"command", "timeout"},
        "read": {"path", "offset", "limit"},
        "write": {"path", "content"},
        "edit": {"path", "old_string", "new_string", "replace_all"},
        "glob": {"pattern", "path"},
        "grep": {"pattern", "path", "glob"},
    }


def test_a_toolset_refuses_a_name_defined_twice():
    with pytest.raises(ValueError, match="the tool read is defined twice"):
        DEFAULT_TOOLS.plus([Tool({"name": "read", "description": "x", "input_schema": {"type": "object"}},
                                 lambda sb, args, left: None)])


def test_the_read_only_toolset_offers_no_write_or_edit_and_says_changes_are_discarded(sandbox):
    assert READ_ONLY_TOOLS.names == ["bash", "read", "glob", "grep"] and not READ_ONLY_TOOLS.keeps_changes
    assert "discarded" in READ_ONLY_TOOLS.schemas[0]["description"]
    refused = READ_ONLY_TOOLS.call(sandbox, "write", {"path": "x", "content": "y"}, time_left=60)
    assert refused.is_error and "unknown tool 'write'; the tools are bash, read, glob, grep" in refused.text
    assert "a - b" in READ_ONLY_TOOLS.call(sandbox, "read", {"path": "src/app.py"}, time_left=60).text


def test_a_toolset_offers_its_tools_in_one_order_and_runs_the_one_named(sandbox):
    echo = Tool({"name": "echo", "description": "Echo", "input_schema": {"type": "object"}},
                lambda sb, args, left: Observation(f"echo {args['text']}"))
    tools = READ_ONLY_TOOLS.plus([echo])
    assert tools.names == ["bash", "read", "glob", "grep", "echo"] and tools.schemas == tools.schemas
    assert tools.call(sandbox, "echo", {"text": "hi"}, time_left=60).text == "echo hi"
    assert "echo needs the parameter text" in tools.call(sandbox, "echo", {}, time_left=60).text


def test_a_failing_command_is_an_observation(sandbox):
    obs = call(sandbox, "bash", command="echo oops >&2; exit 7")
    assert obs.is_error and "oops" in obs.text and "[exit code 7]" in obs.text


def test_a_timeout_is_reported(sandbox):
    obs = call(sandbox, "bash", command="sleep 30", timeout=1)
    assert obs.is_error and "timeout" in obs.text


def test_the_timeout_never_exceeds_the_time_left(sandbox):
    obs = DEFAULT_TOOLS.call(sandbox, "bash", {"command": "sleep 30", "timeout": 500}, time_left=1)
    assert obs.is_error and "killed after 1s" in obs.text


def test_read_numbers_lines_and_pages(sandbox):
    obs = call(sandbox, "read", path="src/app.py", offset=2, limit=1)
    assert obs.text.startswith("     2\t    return a - b")
    assert "more lines" not in obs.text
    assert "1 more lines; read with offset=2" in call(sandbox, "read", path="src/app.py", limit=1).text


def test_edit_write_then_read_back(sandbox):
    assert not call(sandbox, "edit", path="src/app.py", old_string="a - b", new_string="a + b").is_error
    assert "a + b" in call(sandbox, "read", path="src/app.py").text
    call(sandbox, "write", path="new/dir/file.txt", content="hello\n")
    assert "hello" in call(sandbox, "read", path="new/dir/file.txt").text


def test_edit_refuses_ambiguous_or_missing_text(sandbox):
    ambiguous = call(sandbox, "edit", path="notes.txt", old_string="x", new_string="y")
    assert ambiguous.is_error and "2 times" in ambiguous.text
    assert not call(sandbox, "edit", path="notes.txt", old_string="x", new_string="y", replace_all=True).is_error
    assert call(sandbox, "read", path="notes.txt").text.count("y") == 2
    missing = call(sandbox, "edit", path="notes.txt", old_string="zzz", new_string="y")
    assert missing.is_error and "not found" in missing.text


def test_glob_and_grep(sandbox):
    assert call(sandbox, "glob", pattern="**/*.py").text == "src/app.py"
    assert call(sandbox, "grep", pattern=r"return a", glob="*.py").text == "src/app.py:2:    return a - b"
    assert call(sandbox, "grep", pattern="(unclosed").is_error


def test_paths_outside_the_workspace_are_refused(sandbox):
    for name, args in [("read", {"path": "../../etc/passwd"}), ("read", {"path": "/etc/passwd"}),
                       ("write", {"path": "../escape.txt", "content": "x"})]:
        obs = call(sandbox, name, **args)
        assert obs.is_error and "outside the workspace" in obs.text


def test_bad_input_is_explained(sandbox):
    assert "needs the parameter command" in call(sandbox, "bash").text
    assert "unknown tool" in call(sandbox, "browse", url="x").text
