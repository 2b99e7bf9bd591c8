"""`.github/decode.yml`: what a repository asks of its runs.

    setup:            # commands run in the sandbox before the agent, with the public internet
      - pip install -e .[test]
    network: false    # whether the agent reaches the public internet too (default false)
    allow_cidrs:      # private ranges setup and the agent may reach anyway, within DECODE_ALLOW_CIDRS_MAX
      - 10.0.0.0/8    # (never the host or a metadata endpoint; see bot.sandbox.egress_policy)
    allow_domains:    # the agent phase may reach only these names ("*." wildcards); blocked ones
      - packages.example.com  # are listed in the pull request
      - "*.files.example.com"
    allow_workflow_changes: false   # true lets changes under .github/workflows/ be committed
    gpu: "H200:4"     # SANDBOX_MODE=modal: a GPU for the agent's commands
    image: registry.example.com/acme/tools:3  # docker and modal: the sandbox image instead
                                              # of DECODE_SANDBOX_IMAGE (local, bwrap ignore it)
    verify:           # run after the agent's answer, in the agent's sandbox; failures go back to it
      - pytest -q
    verify_rounds: 2  # how many times a failing verify goes back to the agent (1 to 5)
    review_trigger: changes_requested  # a writer's review asking for changes on a decode-bot PR starts a run
    ci_fix: {rounds: 2}  # failed checks on a decode-bot PR start up to this many fix runs (1 to 5)
    thinking: 16000   # extended thinking: on, off or a budget in tokens (overrides DECODE_THINKING; docs/model.md)
    allowed_bots:     # bot accounts whose trigger label and commands start runs like a writer's (this app never)
      - github-actions[bot]
    setup_cache_key:  # docker: keep what setup left, keyed on these files' content (bot/run/setup_cache.py);
      - requirements.lock  # [] keys on the image and the setup commands alone; absent: no cache
    mcp:              # MCP servers the agent may use, by name (bot/agent/mcp.py, docs/decode-yml.md)
      time:
        command: python3 -m mcp_server_time   # shell words or a list; run in the sandbox after setup
        env: {TZ: UTC}                        # plain values, never a secret
        required: false                       # true: a server that does not start fails the run
      docs: {operator: true}                  # the operator's remote server `docs` (DECODE_MCP_SERVERS)

The file is read as a blob from the base commit on the host (the default branch
for an issue, the pull request's base branch for a PR; never the PR's head and
never the agent's tree), see `bot.workspace.trusted_files`. An invalid file is an error
naming the key, before any work.
"""

from __future__ import annotations

import ipaddress
import re
import shlex
from dataclasses import dataclass

import yaml

from bot.config.mcp_servers import MCP_NAME
from bot.config.table import thinking_value
from bot.core.errors import ConfigError
from bot.workspace.trusted_files import Git, read_trusted

PATH = ".github/decode.yml"
KEYS = ("setup", "network", "setup_timeout", "allow_cidrs", "allow_domains", "allow_workflow_changes", "gpu",
        "image", "verify", "verify_rounds", "review_trigger", "ci_fix", "setup_cache_key", "thinking", "allowed_bots",
        "review", "mcp", "attempts")
MAX_CACHE_KEY_FILES = 20
MAX_VERIFY_ROUNDS = 5
MAX_ATTEMPTS = 5
# A docker image reference, [registry[:port]/]name[/name...][:tag][@digest], as the engine parses it.
_REGISTRY = r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*(?::[0-9]+)?/)"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
IMAGE = re.compile(rf"{_REGISTRY}?{_COMPONENT}(?:/{_COMPONENT})*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}})?"
                   r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?")
IMAGE_MAX = 400  # a 255-character name, a 128-character tag and a sha256 digest
BOT_LOGIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})\[bot\]")  # a GitHub App's or Actions' account
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
DOMAIN = re.compile(r"(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")


@dataclass(frozen=True)
class RepoConfig:
    setup: tuple[str, ...] = ()
    network: bool = False
    setup_timeout: float = 900.0
    allow_cidrs: tuple[str, ...] = ()
    allow_domains: tuple[str, ...] = ()
    allow_workflow_changes: bool = False
    gpu: str | None = None
    image: str | None = None  # docker and modal: the sandbox image; None keeps DECODE_SANDBOX_IMAGE
    verify: tuple[str, ...] = ()  # commands run after the agent's answer (bot.run.verify)
    verify_rounds: int = 2  # how many times a failing verify goes back to the agent
    review_trigger: str | None = None  # "changes_requested": such a review on a decode-bot PR starts a run
    ci_fix_rounds: int = 0  # `ci_fix: {rounds: N}`: failed checks on a decode-bot PR start up to N fix runs
    setup_cache_key: tuple[str, ...] | None = None  # files keying the setup cache; None: no setup cache
    thinking: str | int | None = None  # "on", "off" or a budget in tokens; None: DECODE_THINKING decides
    allowed_bots: tuple[str, ...] = ()  # bot logins, lower-cased, whose labels and commands start runs
    attempts: int = 1  # how many attempts of a run go at once, the best published (bot/run/attempts.py)
    review: bool = False  # a read-only pass reviews the diff before the run publishes (bot/run/self_review.py)
    mcp: tuple["McpServer", ...] = ()  # MCP servers the agent may use, in the file's order


@dataclass(frozen=True)
class McpServer:
    """One of decode.yml's `mcp:` servers: a command run in the sandbox (stdio), or, with `operator`, the
    operator's remote server of that name (DECODE_MCP_SERVERS), which the repository only chooses."""

    name: str
    command: str = ""  # a bash command line (a list in the file is joined with shell quoting)
    env: tuple[tuple[str, str], ...] = ()
    required: bool = False
    operator: bool = False


def load_repo_config(git: Git, commit: str) -> RepoConfig:
    """The config committed at `commit` (read as a blob, see `bot.workspace.trusted_files`); defaults without a file."""
    raw = read_trusted(git, commit, PATH)
    return config_of(raw)


def config_of(raw: bytes | None, where: str = "") -> RepoConfig:
    """The config in the file's bytes (None: no file, the defaults); `where` names the branch for errors."""
    if raw is None:
        return RepoConfig()
    try:
        data = yaml.load(raw.decode("utf-8"), Loader=_Loader)  # noqa: S506 (a SafeLoader)
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise ConfigError(f"{PATH}{where} is not valid YAML: {_one_line(e)}") from None
    return parse_repo_config(data)


def _one_line(e: Exception) -> str:
    """A YAML error as one line: where and what, without PyYAML's quoted excerpt of the file."""
    if isinstance(e, yaml.MarkedYAMLError) and e.problem_mark is not None:
        return f"line {e.problem_mark.line + 1}, column {e.problem_mark.column + 1}: {e.problem}"
    return " ".join(str(e).split())


class _Loader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping: PyYAML would keep the last one silently,
    so `network: true` further down than `network: false` would turn the network on unseen."""


def _mapping_once(loader: _Loader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[object, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *defaults`: its keys may be overridden
            continue
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        try:
            first = seen.get(key)
        except TypeError:  # an unhashable key: construct_mapping names it
            continue
        if first is not None:
            raise yaml.YAMLError(f"line {line}: the key {key!r} is given twice (first on line {first}): keep one")
        seen[key] = line
    return loader.construct_mapping(node, deep=deep)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_once)


def parse_repo_config(data: object) -> RepoConfig:
    """Validate the parsed YAML; every error names the key and what it should hold."""
    if data is None:
        return RepoConfig()
    if not isinstance(data, dict):
        raise ConfigError(f"{PATH} must be a mapping with the keys {', '.join(KEYS)}")
    unknown = sorted(set(map(str, data)) - set(KEYS))
    if unknown:
        raise ConfigError(f"{PATH}: unknown key {unknown[0]!r}; the keys are {', '.join(KEYS)}")
    setup = _commands(data, "setup")
    network = data.get("network", False)
    if not isinstance(network, bool):
        raise ConfigError(f"{PATH}: 'network' must be true or false, not {network!r}")
    timeout = data.get("setup_timeout", RepoConfig.setup_timeout)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise ConfigError(f"{PATH}: 'setup_timeout' must be a positive number of seconds, not {timeout!r}")
    cidrs = data.get("allow_cidrs") or []
    if not isinstance(cidrs, list):
        raise ConfigError(f"{PATH}: 'allow_cidrs' must be a list of CIDRs like 10.0.0.0/8")
    for cidr in cidrs:
        try:
            ipaddress.ip_network(str(cidr), strict=False)
        except ValueError:
            raise ConfigError(f"{PATH}: 'allow_cidrs' has {cidr!r}, which is not a CIDR like 10.0.0.0/8") from None
    domains = data.get("allow_domains") or []
    if not isinstance(domains, list) or not all(isinstance(d, str) and DOMAIN.fullmatch(d.lower().rstrip("."))
                                                for d in domains):
        raise ConfigError(f"{PATH}: 'allow_domains' must be a list of host names like packages.example.com or "
                          f"\"*.files.example.com\", not {domains!r}")
    workflows = data.get("allow_workflow_changes", False)
    if not isinstance(workflows, bool):
        raise ConfigError(f"{PATH}: 'allow_workflow_changes' must be true or false, not {workflows!r}")
    gpu = data.get("gpu")
    if gpu is not None and (not isinstance(gpu, str) or not gpu.strip()):
        raise ConfigError(f"{PATH}: 'gpu' must be a Modal GPU spec like \"H200:4\", not {gpu!r}")
    rounds = parse_verify_rounds(data.get("verify_rounds", RepoConfig.verify_rounds))
    return RepoConfig(setup, network, float(timeout), tuple(str(c) for c in cidrs),
                      tuple(d.lower().rstrip(".") for d in domains), workflows, gpu, parse_image(data.get("image")),
                      _commands(data, "verify"), rounds,
                      review_trigger=parse_review_trigger(data.get("review_trigger")),
                      ci_fix_rounds=parse_ci_fix(data.get("ci_fix")),
                      setup_cache_key=parse_setup_cache_key(data.get("setup_cache_key"), "setup_cache_key" in data),
                      thinking=None if data.get("thinking") is None else thinking_value(data["thinking"],
                                                                                         f"{PATH}: thinking"),
                      allowed_bots=parse_allowed_bots(data.get("allowed_bots")),
                      review=parse_review(data.get("review")), mcp=parse_mcp(data.get("mcp")),
                      attempts=parse_attempts(data.get("attempts", 1), f"{PATH}: 'attempts'"))


def parse_review(value: object) -> bool:
    """decode.yml's `review`: true makes the run review its own diff before it publishes; default false."""
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ConfigError(f"{PATH}: 'review' must be true (review the diff before publishing) or false, not "
                          f"{_shown(value)}")
    return value


def parse_attempts(value: object, where: str) -> int:
    """An attempts count (decode.yml's `attempts`, `--attempts`, `/decode attempts=N`), 1 to 5; a `ConfigError`
    starting with `where` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_ATTEMPTS:
        raise ConfigError(f"{where} must be a whole number from 1 to {MAX_ATTEMPTS} (how many attempts run at once; "
                          f"default 1), not {value!r}")
    return value


def parse_mcp(value: object) -> tuple[McpServer, ...]:
    """decode.yml's `mcp:`: NAME -> {command, env, required} (or {operator: true, required}), in the file's order."""
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise ConfigError(f"{PATH}: 'mcp' must be a mapping of server names to {{command, env, required}}, not "
                          f"{_shown(value)}")
    return tuple(_mcp_server(name, entry) for name, entry in value.items())


def _mcp_server(name: object, entry: object) -> McpServer:
    where = f"{PATH}: mcp: {name}"
    if not isinstance(name, str) or not MCP_NAME.fullmatch(name):
        raise ConfigError(f"{PATH}: mcp: the server name {_shown(name)} must be 1 to 24 letters, digits or '-', "
                          "starting with a letter or digit")
    keys = {"command", "env", "required", "operator"}
    if not isinstance(entry, dict) or not set(map(str, entry)) <= keys:
        raise ConfigError(f"{where} must be a mapping with the keys command, env, required (or operator: true), not "
                          f"{_shown(entry)}")
    required, operator = entry.get("required", False), entry.get("operator", False)
    if not isinstance(required, bool) or not isinstance(operator, bool):
        raise ConfigError(f"{where}: 'required' and 'operator' must be true or false")
    if operator:
        if "command" in entry or "env" in entry:
            raise ConfigError(f"{where}: an operator's server (operator: true) takes no command or env: the "
                              "operator configures it (DECODE_MCP_SERVERS)")
        return McpServer(name, required=required, operator=True)
    command = entry.get("command")
    if isinstance(command, list) and command and all(isinstance(w, str) for w in command):
        command = shlex.join(command)
    if not isinstance(command, str) or not command.strip():
        raise ConfigError(f"{where}: 'command' must be a command line (a string) or a list of words, not "
                          f"{_shown(command)}")
    env = entry.get("env") or {}
    if not isinstance(env, dict) or not all(isinstance(k, str) and ENV_NAME.fullmatch(k) and
                                            isinstance(v, (str, int, float)) for k, v in env.items()):
        raise ConfigError(f"{where}: 'env' must map variable names to plain values (strings or numbers), not "
                          f"{_shown(env)}")
    return McpServer(name, command, tuple((k, str(v)) for k, v in env.items()), required)


def parse_allowed_bots(value: object) -> tuple[str, ...]:
    """decode.yml's `allowed_bots`: the bot logins (`name[bot]`) whose trigger label and commands start runs,
    lower-cased as GitHub compares logins; empty when absent (no bot starts a run)."""
    logins = [] if value is None else value
    if not isinstance(logins, list) or not all(isinstance(x, str) and BOT_LOGIN.fullmatch(x) for x in logins):
        raise ConfigError(f"{PATH}: 'allowed_bots' must be a list of bot logins like github-actions[bot] or "
                          f"my-triage[bot] (a GitHub App's account, ending in [bot]), not {_shown(value)}")
    return tuple(dict.fromkeys(x.lower() for x in logins))


def parse_setup_cache_key(value: object, given: bool) -> tuple[str, ...] | None:
    """decode.yml's `setup_cache_key`: repository paths (lock files) whose content keys the setup cache, up to
    `MAX_CACHE_KEY_FILES`; an empty list keys on the image and setup commands alone; absent (None): no cache."""
    if not given:
        return None
    paths = [] if value is None else value
    fix = (f"{PATH}: 'setup_cache_key' must be a list of up to {MAX_CACHE_KEY_FILES} file paths relative to the "
           "repository root, such as [requirements.lock, package-lock.json] (no leading /, no '..'), not ")
    if not isinstance(paths, list) or len(paths) > MAX_CACHE_KEY_FILES:
        raise ConfigError(fix + _shown(value))
    for path in paths:
        if not isinstance(path, str) or not path.strip() or path.startswith("/") or path.endswith("/") \
                or any(part in ("", ".", "..") for part in path.split("/")) or "\\" in path:
            raise ConfigError(fix + f"{_shown(path)} in it")
    return tuple(paths)


def parse_review_trigger(value: object) -> str | None:
    """decode.yml's `review_trigger`: `changes_requested` or absent (no review starts a run by itself)."""
    if value is not None and value != "changes_requested":
        raise ConfigError(f"{PATH}: 'review_trigger' must be changes_requested (a writer's review asking for changes "
                          f"on a decode-bot pull request starts a run) or left out, not {_shown(value)}")
    return value


def _commands(data: dict, key: str) -> tuple[str, ...]:
    """`key`'s commands: one command or a list of them, each a non-empty string."""
    commands = data.get(key) or []
    if isinstance(commands, str):
        commands = [commands]
    if not isinstance(commands, list) or not all(isinstance(c, str) and c.strip() for c in commands):
        raise ConfigError(f"{PATH}: '{key}' must be a command or a list of commands (strings), not {_shown(commands)}")
    return tuple(commands)


def parse_ci_fix(value: object) -> int:
    """decode.yml's `ci_fix: {rounds: N}`: how many fix runs failed checks on a decode-bot PR may start, 1 to 5
    (0 when absent: off)."""
    if value is None:
        return 0
    rounds = value.get("rounds") if isinstance(value, dict) and set(value) <= {"rounds"} else None
    if isinstance(rounds, bool) or not isinstance(rounds, int) or not 1 <= rounds <= MAX_VERIFY_ROUNDS:
        raise ConfigError(f"{PATH}: 'ci_fix' must be a mapping like {{rounds: 2}}, rounds a whole number from 1 to "
                          f"{MAX_VERIFY_ROUNDS} (how many fix runs failed checks on a decode-bot pull request may "
                          f"start), not {_shown(value)}")
    return rounds


def parse_verify_rounds(rounds: object) -> int:
    """decode.yml's `verify_rounds`: how many times a failing `verify` goes back to the agent, 1 to 5."""
    if isinstance(rounds, bool) or not isinstance(rounds, int) or not 1 <= rounds <= MAX_VERIFY_ROUNDS:
        raise ConfigError(f"{PATH}: 'verify_rounds' must be a whole number from 1 to {MAX_VERIFY_ROUNDS} (how many "
                          f"times a failing 'verify' goes back to the agent; default {RepoConfig.verify_rounds}), "
                          f"not {_shown(rounds)}")
    return rounds


def parse_image(image: object) -> str | None:
    """decode.yml's `image`: a docker image reference such as registry.example.com/acme/tools:3, or None.

    Checked here because it becomes an argument of `docker create`: no option, space or control character.
    """
    if image is None:
        return None
    if not isinstance(image, str) or len(image) > IMAGE_MAX or not IMAGE.fullmatch(image):
        raise ConfigError(f"{PATH}: 'image' must be a docker image reference like "
                          f"registry.example.com/acme/tools:3 (lowercase name, optional registry, :tag or "
                          f"@sha256:digest), not {_shown(image)}")
    return image


def _shown(value: object) -> str:
    """`value` as the error message shows it: its repr, cut at 80 characters."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
