"""`decode action`: the GitHub Actions entry point.

Reads the standard `GITHUB_*` variables and the event file, applies the same
trigger rules and permission checks as the App, adds `schedule` and
`workflow_dispatch` runs with a prompt, and writes `GITHUB_OUTPUT` (pr_url,
branch, conclusion, verified, cost_usd, transcript_path) and a job summary to
`GITHUB_STEP_SUMMARY`. Exit status (the run result's `exit_code`, as the CLI's): 0 for
success, no changes or skipped, 3 for a run stopped by a budget cap, 1 for a
failure, 2 for a setting, token or event file that cannot work (the outputs and
summary are written first), 130 when interrupted.
(https://docs.github.com/en/actions/writing-workflows/choosing-what-your-workflow-does/store-information-in-variables#default-environment-variables)
"""

from __future__ import annotations

import glob
import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from bot.config import Settings
from bot.core.errors import ConfigError
from bot.core.names import actions_origin, run_tag
from bot.github.auth import TokenCredentials
from bot.github.body import split_markdown
from bot.github.forge import GitHubForge
from bot.github.conclusion import Conclusion
from bot.github.job import JobContext, run_github_job
from bot.model import Model, make_model
from bot.run.pipeline import Job, Ran
from bot.run.transcript import render_figures
from bot.sandbox import preflight
from bot.workspace.clone import require_git
from bot.workspace.run_dirs import drop_clones
from bot.github.triggers import WORKFLOW_RUNS, Decision, Ignore, Router, Rules
from bot.github.work import Dispatch, Work

SUMMARY_LIMIT = 900_000  # GitHub allows 1 MiB of step summary per step
RUNNER_PRIVATE = ("GITHUB_WORKSPACE", "RUNNER_TEMP", "HOME")  # what the sandbox must not see on a runner


def require(env: Mapping[str, str], name: str, what: str) -> str:
    value = env.get(name, "").strip()
    if not value:
        raise ConfigError(what)
    return value


def action_router(settings: Settings, prompt: str, repo: str) -> Router:
    """The App's router, with the Action's own routes: `schedule` and `workflow_dispatch` runs with a
    prompt (the dispatch's `prompt` input, else the action's `prompt` input), on `repo`."""
    def run(event: str) -> Callable[[dict, Rules], Decision]:
        def handle(payload: dict, rules: Rules) -> Decision:
            text = str((payload.get("inputs") or {}).get("prompt") or prompt).strip()
            if not text:
                return Ignore(f"a {event} run needs a prompt: set the `prompt` input of the action")
            sender = payload.get("sender") or {}
            ref = str(payload.get("ref") or "").removeprefix("refs/heads/") or None
            return Dispatch(repo=repo, sender_login=sender.get("login", ""), sender_type=sender.get("type", "User"),
                            instructions=text, base_ref=ref)
        return handle

    return Router(Rules.of(settings.github)).with_routes({event: run(event) for event in WORKFLOW_RUNS})


def runner_sandbox(env: Mapping[str, str]) -> dict[str, tuple]:
    """Settings that keep the runner's credentials out of the sandbox and its toolchains in.

    Hidden: the checkout (actions/checkout persists the token in its .git/config,
    https://github.com/actions/checkout#usage `persist-credentials`), RUNNER_TEMP (this
    action's venv and data dir) and the runner user's HOME (~/.git-credentials). The
    step's PATH holds what `actions/setup-*` installed; bwrap shows the entries it can see.
    """
    hide = tuple(Path(env[name]) for name in RUNNER_PRIVATE if env.get(name))
    path = tuple(p for p in env.get("PATH", "").split(os.pathsep) if p)
    return {"sandbox_hide": hide, "sandbox_path": path}


def run_action(env: Mapping[str, str] | None = None) -> int:
    """Run the action for the event in `env` (default: the process environment).

    A setting or event that cannot work is a `ConfigError` (exit 2), raised after the outputs and the
    summary are written, so the workflow's later steps still see `conclusion=failed`."""
    env = os.environ if env is None else env
    try:
        prepared = _prepare(env)
    except ConfigError as e:
        finish(env, Conclusion.of_job("failed", str(e), error=e))
        raise
    if isinstance(prepared, Conclusion):
        return finish(env, prepared)
    settings, work, token, model = prepared
    repo = work.repo
    run_id = env.get("GITHUB_RUN_ID") or Job.new_run_id()  # a re-run keeps GITHUB_RUN_ID: it finds its comments
    server = env.get("GITHUB_SERVER_URL", "https://github.com").rstrip("/")
    run_url = f"{server}/{repo}/actions/runs/{run_id}" if env.get("GITHUB_RUN_ID") else None
    forge = GitHubForge(TokenCredentials(token, settings.github.api_url))
    conclusion = run_github_job(JobContext(
        work, forge, run_id, run_tag(actions_origin(repo), run_id), run_url=run_url, model=model,
        authorize=not isinstance(work, Dispatch), attempt=int(env.get("GITHUB_RUN_ATTEMPT") or 1),
        progress=lambda line: print(line, file=sys.stderr, flush=True)), settings.job)
    return finish(env, conclusion, run_id)


def _prepare(env: Mapping[str, str]) -> tuple[Settings, Work, str, Model] | Conclusion:
    """The settings, the work, the token and the model for this event, or the skipped conclusion;
    a `ConfigError` for anything that cannot work."""
    settings = Settings.from_env(env, **runner_sandbox(env), pool_size=0)  # one run: no warm pool
    preflight(settings.sandbox.mode)
    require_git()
    event = require(env, "GITHUB_EVENT_NAME", "GITHUB_EVENT_NAME is not set: run `decode action` inside GitHub Actions")
    repo = require(env, "GITHUB_REPOSITORY", "GITHUB_REPOSITORY is not set: run `decode action` inside GitHub Actions")
    event_path = require(env, "GITHUB_EVENT_PATH", "GITHUB_EVENT_PATH is not set: run `decode action` inside Actions")
    work = action_router(settings, env.get("DECODE_PROMPT", ""), repo).decide(event, read_event(event_path))
    if isinstance(work, Ignore):
        return Conclusion.of_job("skipped", work.reason)
    if settings.model.provider == "anthropic" and not settings.model.name.startswith("scripted:"):
        require(env, "ANTHROPIC_API_KEY", "the anthropic_api_key input is empty: set it to "
                "${{ secrets.ANTHROPIC_API_KEY }} (add the secret under Settings > Secrets and variables > Actions)")
    token = require(env, "GITHUB_TOKEN", "the github_token input is empty: leave it at its default "
                    "(${{ github.token }}) or pass a GitHub App token")
    return settings, work, token, make_model(settings.model)  # a session file that does not load is a ConfigError


def read_event(path: str) -> dict:
    """The event payload the runner wrote to GITHUB_EVENT_PATH (a JSON object); a `ConfigError` naming the
    file when it is missing or not UTF-8 JSON."""
    try:
        payload = json.loads(Path(path).read_bytes().decode("utf-8"))
    except OSError as e:
        raise ConfigError(f"GITHUB_EVENT_PATH={path}: cannot read the event file ({e.strerror})") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"GITHUB_EVENT_PATH={path}: the event file is not UTF-8 ({e.reason} at byte "
                          f"{e.start})") from None
    except ValueError as e:
        raise ConfigError(f"GITHUB_EVENT_PATH={path}: the event file is not JSON ({e})") from None
    if not isinstance(payload, dict):
        raise ConfigError(f"GITHUB_EVENT_PATH={path}: the event file is not a JSON object")
    return payload


def finish(env: Mapping[str, str], conclusion: Conclusion, run_id: str = "") -> int:
    """Write the step outputs and the job summary of the job `run_id`; the exit status for the conclusion."""
    result = conclusion.recorded(env.get("GITHUB_RUN_ID", ""))  # the artifact's record.json: what the outputs say
    ran = conclusion.ran
    outputs = {"pr_url": result.pr_url or "", "branch": result.branch or "", "conclusion": result.state,
               "verified": result.verified, "cost_usd": f"{result.figures.cost_usd if result.figures else 0.0:.4f}",
               "transcript_path": transcripts(ran, run_id)}
    append(env, "GITHUB_OUTPUT", "".join(f"{k}={v}\n" for k, v in outputs.items()))
    append(env, "GITHUB_STEP_SUMMARY", summary(conclusion))
    if result.state == "failed":
        print(f"::error title=decode-bot::{conclusion.message.splitlines()[0] if conclusion.message else 'failed'}")
    print(f"decode-bot: {result.state}" + (f" {result.pr_url}" if result.pr_url else "")
          + (f" ({conclusion.message})" if result.state == "skipped" else ""))
    return result.exit_code


def transcripts(ran: Ran | None, run_id: str) -> str:
    """The `transcript_path` output, what the workflow uploads: the run's directory; for attempts (the published
    one's run id is not the job's, bot/run/attempts.py) the runs directory, which holds each attempt's, as the
    pull request body's rows name them. It holds this job's runs only (the runner empties its temp directory
    for each job, and goes with it), so the attempts' clones are dropped, not uploaded."""
    if ran is None:
        return ""
    if ran.job.run_id == run_id:
        return str(ran.run_dir)
    for attempt in ran.run_dir.parent.glob(f"{glob.escape(run_id)}-*"):
        drop_clones(attempt)
    return str(ran.run_dir.parent)


def append(env: Mapping[str, str], name: str, text: str) -> None:
    """Append `text` to the file the runner names in `name`, if set; a ConfigError naming the variable when that
    file cannot be written (else a bare path and "DECODE_DATA_DIR" were named)."""
    if path := env.get(name):
        try:
            with open(path, "a", encoding="utf-8") as f:
                f.write(text)
        except OSError as e:
            raise ConfigError(f"{name}={path}: cannot write it ({e.strerror}): the runner sets it to a file; unset "
                              "it outside GitHub Actions") from None


def summary(conclusion: Conclusion) -> str:
    """The job summary: the conclusion, the PR, the figures and the transcript."""
    lines = [f"## decode-bot: {conclusion.state}", ""]
    if conclusion.result.pr_url:
        lines += [f"Pull request: {conclusion.result.pr_url}", ""]
    if conclusion.state == "skipped":
        lines += [f"Nothing to do: {conclusion.message}", ""]
    ran = conclusion.ran
    if conclusion.state == "failed":
        lines += ["```text", conclusion.message.split("\n\n")[0] if ran else conclusion.message, "```", ""]
    if ran is None:
        return "\n".join(lines)
    figures = render_figures(ran.result.figures, ran.result.stop_reason or "") if ran.result.figures else ""
    lines += [ran.verification.line(), "", figures, ""]
    parts = split_markdown(ran.transcript_md.read_text(), SUMMARY_LIMIT)
    transcript = parts[0] + ("\n(truncated: the whole transcript is in the artifact)\n" if len(parts) > 1 else "")
    lines += ["<details><summary>Transcript</summary>", "", transcript, "", "</details>", ""]
    return "\n".join(lines)
