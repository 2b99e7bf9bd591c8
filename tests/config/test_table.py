"""The settings table: its mode list matches the sandbox backends, its defaults are what an empty environment
gives, docs/settings.md is generated from it, and it lists every environment variable the code reads."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from bot.config import GROUPS, ROWS, Budget, Settings
from bot.config.docs import render
from bot.config.table import OTHER_VARIABLES, SANDBOX_MODES
from bot.core.errors import ConfigError
from bot.sandbox import BACKENDS, sandbox_spec

ROOT = Path(__file__).resolve().parents[2]
LISTED = {row.var for row in ROWS if row.var} | {name for name, _ in OTHER_VARIABLES}


def test_the_sandbox_modes_are_the_backends_table():
    assert SANDBOX_MODES == tuple(BACKENDS)


def test_an_empty_environment_gives_the_defaults_and_the_rows_fill_every_part():
    assert Settings.from_env({}) == Settings()
    assert Settings().budget == Budget() == Budget(max_turns=60, max_tokens=5_000_000, max_cost_usd=10.0,
                                                   max_wall_s=3600.0)
    assert len({row.key for row in ROWS}) == len(ROWS) and len({row.lands for row in ROWS}) == len(ROWS)
    for name, part in GROUPS.items():
        landed = {row.lands.split(".", 1)[1] for row in ROWS if row.lands.startswith(name + ".")}
        derived = {"pool_dir"} if name == "sandbox" else set()
        assert landed | derived == set(part.__dataclass_fields__), name


def test_a_setting_is_given_by_its_row_key_or_a_whole_part_and_nothing_else():
    settings = Settings(sandbox_mode="bwrap", data_dir=Path("/srv/d"), budget=Budget(max_turns=3))
    assert (settings.sandbox.mode, settings.store.data_dir, settings.budget.max_turns) == ("bwrap", Path("/srv/d"), 3)
    assert settings.sandbox.hide[0] == Path("/srv/d") and settings.sandbox.pool_dir == Path("/srv/d/pool")
    assert settings.replace(max_turns=5).budget == Budget(max_turns=5) and settings.budget.max_turns == 3
    with pytest.raises(TypeError, match="sandbox.mode"):
        Settings(**{"sandbox.mode": "local"})
    with pytest.raises(AttributeError):
        settings.budget = Budget()  # type: ignore[misc]


def test_a_malformed_variable_is_one_line_naming_it_and_the_fix():
    with pytest.raises(ConfigError) as e:
        Settings.from_env({"DECODE_TIMEOUT_MINUTES": "soon"})
    assert str(e.value) == "DECODE_TIMEOUT_MINUTES='soon' is not valid: set it to a positive float"
    with pytest.raises(ConfigError, match=r"^SANDBOX_MODE='vm' is not valid: set it to one of local, bwrap, docker, "):
        Settings.from_env({"SANDBOX_MODE": "vm"})
    assert Settings.from_env({"DECODE_TIMEOUT_MINUTES": "2"}).budget.max_wall_s == 120


@pytest.mark.parametrize("raw, value", [("", "on"), ("on", "on"), ("OFF", "off"), ("1024", 1024), ("32000", 32000)])
def test_decode_thinking_is_on_off_or_a_budget_of_at_least_1024_tokens(raw, value):
    assert Settings.from_env({"DECODE_THINKING": raw}).model.thinking == value


@pytest.mark.parametrize("raw", ["1023", "yes", "-5000", "16k"])
def test_a_bad_decode_thinking_names_the_fix(raw):
    with pytest.raises(ConfigError) as e:
        Settings.from_env({"DECODE_THINKING": raw})
    assert str(e.value) == (f"DECODE_THINKING={raw!r} is not valid: set it to on, off or a thinking budget in tokens "
                            "of at least 1024 (such as 16000)")


def test_decode_hide_paths_joins_the_hidden_paths_and_wants_absolute_ones(tmp_path):
    key = tmp_path / "app.pem"
    key.write_text("-----BEGIN RSA PRIVATE KEY-----\nx\n-----END RSA PRIVATE KEY-----\n")
    settings = Settings.from_env({"DECODE_HIDE_PATHS": "/etc/creds::/srv/token", "DECODE_DATA_DIR": "/srv/d",
                                  "GITHUB_APP_PRIVATE_KEY_PATH": str(key)})
    assert settings.sandbox.hide == (Path("/srv/d"), Path("/etc/creds"), Path("/srv/token"), key)
    assert settings.replace(sandbox_hide=(Path("/runner"),)).sandbox.hide[1:4] == (
        Path("/etc/creds"), Path("/srv/token"), Path("/runner"))  # the Action's paths add to the operator's
    with pytest.raises(ConfigError, match=r"^DECODE_HIDE_PATHS: 'creds' is not an absolute path"):
        Settings.from_env({"DECODE_HIDE_PATHS": "/etc/x:creds"})
    vertex = Settings.from_env({"DECODE_DATA_DIR": "/srv/d", "GOOGLE_APPLICATION_CREDENTIALS": "/etc/gcp/sa.json"})
    assert vertex.sandbox.hide == (Path("/srv/d"), Path("/etc/gcp/sa.json"))  # Vertex AI's key file, like the App's


def test_docs_settings_md_is_generated_from_the_table():
    """Regenerate with `python -m bot.config.docs > docs/settings.md`."""
    assert (ROOT / "docs" / "settings.md").read_text() == render()
    assert all(f"`{name}`" in render() for name in LISTED)


def _constants(tree: ast.Module) -> dict[str, tuple[str, ...]]:
    """Module-level names bound to a string or a tuple of strings."""
    found: dict[str, tuple[str, ...]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value
            items = value.elts if isinstance(value, (ast.Tuple, ast.List)) else [value]
            if all(isinstance(i, ast.Constant) and isinstance(i.value, str) for i in items):
                found[node.targets[0].id] = tuple(i.value for i in items)  # type: ignore[union-attr]
    return found


def _names(node: ast.expr, constants: dict[str, tuple[str, ...]], loops: dict[str, tuple[str, ...]]) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.Name):
        return set(loops.get(node.id) or constants.get(node.id) or ())
    return set()


def _is_env(node: ast.expr) -> bool:
    text = ast.unparse(node)
    return text == "os.environ" or text.split(".")[-1] in ("env", "client_env", "source")  # not WSGI's environ


def environment_reads(source: str) -> set[str]:
    """The variable names `source` reads: `env.get(NAME)`, `env[NAME]`, `os.getenv(NAME)` and a helper called
    with the environment and a name (`require(env, "GITHUB_REPOSITORY", ...)`); a NAME may be a module
    constant, or a comprehension's variable over one (`for k in CLIENT_VARS`)."""
    tree = ast.parse(source)
    constants = _constants(tree)
    loops = {gen.target.id: constants.get(gen.iter.id, ())  # type: ignore[union-attr]
             for node in ast.walk(tree) if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp))
             for gen in node.generators if isinstance(gen.target, ast.Name) and isinstance(gen.iter, ast.Name)}
    reads: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_env(node.value):
            reads |= _names(node.slice, constants, loops)
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "get" and _is_env(func.value):
                reads |= _names(node.args[0], constants, loops)
            elif isinstance(func, ast.Attribute) and func.attr == "getenv":
                reads |= _names(node.args[0], constants, loops)
            elif len(node.args) > 1 and _is_env(node.args[0]):
                reads |= {n for n in _names(node.args[1], constants, loops) if n.isupper()}
    return {name for name in reads if name.replace("_", "").isalnum() and name.isupper()}


def test_the_scan_finds_each_way_of_reading_a_variable():
    source = ('import os\nNAMES = ("A_ONE", "A_TWO")\nX = "A_SIX"\nos.environ.get("A_THREE")\nenv["A_FOUR"]\n'
              'require(env, "A_FIVE", "what")\nos.environ[X]\n{k: env[k] for k in NAMES}\nenv["NOT_READ"] = "1"\n')
    assert environment_reads(source) == {"A_ONE", "A_TWO", "A_THREE", "A_FOUR", "A_FIVE", "A_SIX"}


def test_every_environment_variable_the_bot_reads_is_in_the_table():
    reads = {name: path for path in sorted((ROOT / "bot").rglob("*.py"))
             for name in environment_reads(path.read_text())}
    assert {"GITHUB_EVENT_PATH", "DOCKER_HOST", "DECODE_EGRESS_SOCKET", "GITHUB_APP_PRIVATE_KEY_PATH",
            "SSH_AUTH_SOCK"} <= reads.keys()
    missing = {name: str(path.relative_to(ROOT)) for name, path in reads.items() if name not in LISTED}
    assert not missing, f"add these to bot/config/table.py (ROWS or OTHER_VARIABLES): {missing}"


def test_no_part_of_the_settings_shows_a_secret_in_its_repr():
    """A part printed in an f-string, a log line or an error (`DECODE_MODEL={settings.model}`) shows no secret."""
    env = {"ANTHROPIC_API_KEY": "sk-ant-key1", "GITHUB_TOKEN": "ghp_token1", "GITHUB_WEBHOOK_SECRET": "hook1",
           "GITHUB_APP_PRIVATE_KEY": "-----BEGIN RSA PRIVATE KEY-----\npem1\n-----END RSA PRIVATE KEY-----",
           "GITHUB_CLIENT_SECRET": "oauth1", "DECODE_METRICS_TOKEN": "metrics1",
           "DECODE_DATABASE_URL": "postgresql://u:dbpass1@h/d", "AWS_SECRET_ACCESS_KEY": "awssecret1",
           "AWS_SESSION_TOKEN": "awssession1", "AWS_BEARER_TOKEN_BEDROCK": "bedrockkey1"}
    settings = Settings.from_env(env)
    shown = " ".join(repr(getattr(settings, part)) for part in ("model", "github", "store", "web"))
    assert "claude" in shown and "https://api.github.com" in shown  # the parts are shown...
    assert not [s for s in ("sk-ant-key1", "ghp_token1", "hook1", "pem1", "oauth1", "metrics1", "dbpass1",
                            "awssecret1", "awssession1", "bedrockkey1") if s in shown]  # ...without their secrets
    assert {"awssecret1", "awssession1", "bedrockkey1"} <= set(settings.secrets())  # and redacted everywhere


def test_the_sandbox_s_memory_and_its_restarts_are_settings(tmp_path):
    assert sandbox_spec(Settings().sandbox, tmp_path).memory_mb == 4096 and Settings().sandbox.max_restarts == 2
    settings = Settings.from_env({"DECODE_MAX_MEMORY_MB": "512", "DECODE_MAX_RESTARTS": "0"})
    assert sandbox_spec(settings.sandbox, tmp_path).memory_mb == 512 and settings.sandbox.max_restarts == 0
    with pytest.raises(ConfigError, match=r"^DECODE_MAX_RESTARTS='-1' is not valid: set it to how many times a run "):
        Settings.from_env({"DECODE_MAX_RESTARTS": "-1"})
    with pytest.raises(ConfigError, match=r"^DECODE_MAX_MEMORY_MB='0' is not valid: set it to a positive int$"):
        Settings.from_env({"DECODE_MAX_MEMORY_MB": "0"})
