"""`decode check`: is this setup right, and what would a run do in this repository?

It validates the settings (`Settings.from_env`, already done by the caller) and a
`.github/decode.yml` with the loaders a run uses (bot/run/repo_config.py): `--file PATH`,
else a local repository's working-tree file (the edit being made; a note says when it
differs from the committed file a run reads), else a GitHub repository's default branch.
Then it says, one line per topic, what a run there would do: the model, the sandbox and
its image (for docker: whether the engine has it), the setup commands, the network of
each phase, verification, the setup cache, the budget and the MCP servers. It is a linter first: without
an API key the model is not checked (the output says so), everything else is. Nothing is
cloned, started or sent to the model; any problem is a `ConfigError` (exit status 2)
naming the fix.
With `--start` (a local repository), each MCP server of decode.yml is started in a sandbox, after setup,
as a run starts it, and its tools are listed; the last line is then the verdict on both (exit 1 when
a server does not start), never an "ok" above a failure.
"""

from __future__ import annotations

import argparse
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bot.cli.repo import github_repo_name, local_repository
from bot.config import Settings
from bot.core.errors import ConfigError, SandboxError
from bot.model.thinking import DEFAULT_BUDGET
from bot.run.repo_config import PATH, McpServer, RepoConfig, config_of
from bot.sandbox import capabilities, offering, preflight
from bot.sandbox.egress_policy import check_ceiling
from bot.workspace.trusted_files import read_trusted


@dataclass(frozen=True)
class Found:
    """A decode.yml: where from (the line for people, `repository: ...` or `file: ...`), its parsed value, and
    a note when a run would read another version of it."""

    where: str
    config: RepoConfig
    present: bool
    note: str = ""
    top: str | None = None  # a local repository's top level, and the commit read
    commit: str | None = None


def cmd_check(args: argparse.Namespace, settings: Settings) -> int:
    """`decode check [--repo R] [--file F]`: find the decode.yml (F, a local repository's working tree, else
    GitHub's) and `check` it."""
    if args.file is not None:
        return check(settings, file_config(Path(args.file).expanduser()))
    local = Path(args.repo).expanduser()
    if local.exists():
        found = local_config(local_repository(local, warn=False))
        if not getattr(args, "start", False):
            return check(settings, found)
        from bot.cli.check_mcp import start_servers
        top, commit = found.top, found.commit
        assert top is not None and commit is not None  # local_config sets both
        return check(settings, found, start=lambda say: start_servers(settings, found.config, top, commit, say))
    github_repo = github_repo_name(args.repo, settings.github.api_url)
    if github_repo is None:
        raise ConfigError(f"--repo {args.repo}: no such path, and not owner/name or a GitHub URL")
    if getattr(args, "start", False):
        raise ConfigError("--start needs a local repository (--repo PATH): its MCP servers start from its files")
    return check(settings, github_config(github_repo, settings))


def file_config(path: Path) -> Found:
    """The decode.yml at `path` (`--file`); its errors name that file."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ConfigError(f"--file {path}: {e.strerror}: name the decode.yml to check") from None
    try:
        return Found(f"file: {path}", config_of(raw), True)  # `file: PATH: valid`
    except ConfigError as e:
        raise ConfigError(str(e).replace(PATH, str(path), 1)) from None


def local_config(top: str) -> Found:
    """decode.yml in the working tree of the local repository whose top level is `top` (see bot/cli/repo.py's
    local_repository), with a note when it differs from HEAD's, which a run reads."""

    def git(*argv: str, what: str = "") -> bytes:
        done = subprocess.run(["git", "-C", top, *argv], capture_output=True)
        if done.returncode != 0:
            raise ConfigError(f"{top}: git failed {what}: {done.stderr.decode(errors='replace').strip()}")
        return done.stdout

    commit = git("rev-parse", "--verify", "HEAD^{commit}", what="finding HEAD").decode().strip()
    branch = git("rev-parse", "--abbrev-ref", "HEAD", what="naming HEAD").decode().strip()
    committed = read_trusted(git, commit, PATH)
    at = f"{branch} {commit[:12]}"
    if git("rev-parse", "--is-bare-repository", what="looking for a working tree").strip() == b"true":
        return Found(f"repository: {top} at {at}; {PATH}", config_of(committed, f" on {branch}"), committed is not None,
                     top=top, commit=commit)
    try:
        raw = (Path(top) / PATH).read_bytes()
    except FileNotFoundError:
        raw = None
    except OSError as e:
        raise ConfigError(f"{Path(top) / PATH}: cannot read it ({e.strerror})") from None
    note = "" if raw == committed else (f"the working tree's {PATH} is not the one committed at {at}, which a run "
                                       "reads: commit it for runs to use it")
    return Found(f"repository: {top} at {at} (working tree); {PATH}", config_of(raw, " (working tree)"),
                 raw is not None, note, top, commit)


def github_config(repo: str, settings: Settings) -> Found:
    """decode.yml on the default branch of GitHub's `repo`, read through the API with the configured token."""
    from bot.github.auth import credentials_from
    from bot.github.forge import GitHubForge

    forge = GitHubForge(credentials_from(settings.github))
    branch = forge.repository(repo).default_branch
    raw = forge.file_at(repo, PATH, branch)
    return Found(f"repository: {repo} at {branch}; {PATH}", config_of(raw, f" on {branch}"), raw is not None)


def check(settings: Settings, found: Found, say: Callable[[str], None] = print,
          start: Callable[[Callable[[str], None]], list[str]] | None = None) -> int:
    """Say what a run with `settings` would do in `found`'s repository; 0, or a ConfigError naming the fix.
    `start` (`--start`) starts the MCP servers before the verdict and returns the names of those that did not
    start: then the verdict says so and the status is 1."""
    check_ceiling(found.config.allow_cidrs, settings.sandbox.allow_cidrs_max)
    config = found.config
    keyed = model_line(settings, say)
    preflight(settings.sandbox.mode)  # what every door checks before any work: e.g. Modal's credentials
    if settings.sandbox.mode == "docker":
        docker_image(config.image or settings.sandbox.image)
    say(f"{found.where}: {'valid' if found.present else 'none, so the defaults'}")
    if found.note:
        say(f"note: {found.note}")
    say(f"thinking: {thinking_line(settings.model.thinking if config.thinking is None else config.thinking)} "
        f"({'thinking: in ' + PATH if config.thinking is not None else 'DECODE_THINKING'})")
    mode = settings.sandbox.mode
    offers = capabilities(mode)
    if offers.image:
        image = config.image or settings.sandbox.image
        say(f"sandbox: {mode}, image {image} ({'image: in ' + PATH if config.image else 'DECODE_SANDBOX_IMAGE'})")
    else:
        ignored = f"; {PATH}'s image {config.image} is ignored" if config.image else ""
        say(f"sandbox: {mode}, on the host's toolchain{ignored}"
            + ("" if offers.isolating else " (no isolation: for trusted input only, a fork's PR is refused)"))
    if config.gpu:
        say(f"gpu: {config.gpu}" if offers.gpu else
            f"gpu: {config.gpu} asked, but only SANDBOX_MODE={' and '.join(offering('gpu'))} gives one; ignored")
    timeout = f"each up to {config.setup_timeout:g} s (clamped by the run's wall clock)"
    say(f"setup: {len(config.setup)} command{'s' if len(config.setup) != 1 else ''}, {timeout}: "
        + "; ".join(config.setup) if config.setup else "setup: none")
    network_lines(config, offers.egress_policy, say)
    say(f"verify: {'; '.join(config.verify)}, a failure goes back to the agent up to {config.verify_rounds} "
        "times" if config.verify else "verify: none (the pull request says the harness verified nothing)")
    say("self-review: " + ("a read-only pass reviews the diff; findings that matter go back to the agent once"
                           if config.review else "off (review: true turns it on)"))
    say(f"setup cache: {cache_state(settings, config, offers.setup_cache)}")
    b = settings.budget
    say(f"budget: {b.max_turns} turns, {b.max_tokens:,} tokens, ${b.max_cost_usd:g}, {b.max_wall_s / 60:g} minutes "
        "(DECODE_MAX_TURNS, DECODE_MAX_TOKENS, DECODE_MAX_COST_USD, DECODE_TIMEOUT_MINUTES)")
    say("workflow changes: " + ("committed (allow_workflow_changes)" if config.allow_workflow_changes
                                else "left out of the commit and named in the PR"))
    extras = [f"review_trigger: {config.review_trigger}"] if config.review_trigger else []
    extras += [f"ci_fix: up to {config.ci_fix_rounds} fix runs"] if config.ci_fix_rounds else []
    extras += [f"allowed_bots: {', '.join(config.allowed_bots)}"] if config.allowed_bots else []
    say(f"triggers: label {settings.github.trigger_label!r}, command {settings.github.command!r}"
        + "".join(f"; {e}" for e in extras))
    for server in config.mcp:
        say(f"mcp: {server_line(server, settings)}")
    if start is not None and (failed := start(say)):
        say(f"not ok: the settings and decode.yml are valid, but MCP server {', '.join(failed)} did not start (above)")
        return 1
    say("ok: a run would start with these settings" if keyed else
        "ok: the settings and decode.yml are valid; a run needs ANTHROPIC_API_KEY too")
    return 0


def docker_image(image: str) -> None:
    """A ConfigError unless the Docker engine answers and has `image`; the missing image's names the command that
    builds it."""
    from bot.sandbox.docker_engine import image_id

    try:
        image_id(image)
    except SandboxError as e:
        raise ConfigError(str(e)) from None


def thinking_line(setting: str | int) -> str:
    """What a thinking setting asks for; whether the model has it is known only when a run asks its Models API."""
    if setting == "off":
        return "off"
    if setting == "on":
        return f"on where the model supports it (adaptive, else a {DEFAULT_BUDGET:,}-token budget)"
    return f"a budget of {setting:,} tokens where the model supports it"


def model_line(settings: Settings, say: Callable[[str], None]) -> bool:
    """The model a run would call, and whether it is checked: without ANTHROPIC_API_KEY it is not (a linter
    needs no key); a missing session file, or the region or project of Bedrock or Vertex AI (which would end
    every run), is the error."""
    if settings.model.name.startswith("scripted:"):
        session = Path(settings.model.name.removeprefix("scripted:"))
        if not session.is_file():
            raise ConfigError(f"DECODE_MODEL={settings.model.name}: no file {session}: name a session JSON or a "
                              "transcript.jsonl to replay")
        say(f"model: replaying {session} (no API key needed)")
        return True
    if settings.model.provider != "anthropic":
        from bot.model import make_model  # builds the provider's client, without a request

        model = make_model(settings.model)  # a ConfigError names the variable the provider lacks
        say(f"model: {settings.model.name} on {settings.model.provider} at {getattr(model, 'base_url', '')} "
            "(the credentials are checked by the first request of a run)")
        return True
    if not settings.model.api_key:
        say(f"model: {settings.model.name}, not checked: ANTHROPIC_API_KEY is not set, and a run needs it (or "
            "DECODE_MODEL=scripted:FILE to replay a recorded session)")
        return False
    say(f"model: {settings.model.name} at {settings.model.base_url or 'the Anthropic API'} "
        "(the key is checked by the first request of a run)")
    return True


def network_lines(config: RepoConfig, enforced: bool, say: Callable[[str], None]) -> None:
    """What setup and the agent may reach; under a backend without an egress policy, the host's network."""
    if not enforced:
        say("network: the host's own, in every phase (this sandbox enforces no egress policy)")
        return
    private = f"; private ranges {', '.join(config.allow_cidrs)}" if config.allow_cidrs else ""
    say(f"network (setup): {'public HTTP(S) through the egress proxy' if config.setup else 'none (no setup)'}{private}")
    if config.network:
        agent = "public HTTP(S) through the egress proxy (network: true)"
    elif config.allow_domains:
        agent = f"only {', '.join(config.allow_domains)} through the egress proxy (allow_domains)"
    else:
        agent = "none (network: false); blocked attempts are listed in the PR"
    say(f"network (agent): {agent}{private}")


def cache_state(settings: Settings, config: RepoConfig, offered: bool) -> str:
    """Whether a run would use the setup cache, and why not when it would not."""
    if config.setup_cache_key is None:
        return "off (no setup_cache_key)"
    if not offered:
        return f"off: SANDBOX_MODE={settings.sandbox.mode} does not cache (only {', '.join(offering('setup_cache'))})"
    if settings.sandbox.setup_cache_mb == 0:
        return "off: DECODE_SETUP_CACHE_MB=0"
    keyed = ", ".join(config.setup_cache_key) or "the image and setup commands alone"
    return (f"on, keyed on {keyed}; entries in {settings.store.data_dir / 'setup-cache'}, "
            f"up to {settings.sandbox.setup_cache_mb} MB (DECODE_SETUP_CACHE_MB)")


def server_line(server: McpServer, settings: Settings) -> str:
    """One MCP server of decode.yml, as a run would start it."""
    required = ", required (a run fails when it does not start)" if server.required else ""
    if server.operator:
        known = any(r.name == server.name for r in settings.mcp.servers)
        where = "the operator's, on the host" if known else "the operator's, but DECODE_MCP_SERVERS offers none " \
                                                            "of that name: a run goes on without it"
        return f"{server.name} ({where}){required}"
    return f"{server.name}: {server.command} (in the sandbox, after setup){required}"
