"""Just enough of the Actions runner to run action.yml as a composite action against the fake GitHub
and the fake Messages API."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.fakes.webhook_examples import example

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "fix-weekend"
OWNER, NAME, REPO = "octo", "calendar", "octo/calendar"
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
TOKEN = re.compile(r"\s*('[^']*'|[A-Za-z_][\w.-]*|&&|\|\||==|!=|!|[(),])")


class Runner:
    """Just enough of the Actions runner for a composite action with `run:` steps."""

    def __init__(self, workdir: Path, runner_temp: Path, github: dict[str, str], env: dict[str, str]) -> None:
        self.workdir, self.temp, self.github, self.env = workdir, runner_temp, github, env
        self.secrets: dict[str, str] = {}  # the `secrets` context a workflow's `with:` reads

    def evaluate(self, text: str, contexts: dict) -> str:
        def one(match: re.Match[str]) -> str:
            value: object = contexts
            for part in match.group(1).split("."):
                value = value.get(part, "") if isinstance(value, dict) else ""
            return str(value)
        return EXPRESSION.sub(one, str(text))

    def run(self, event: str, payload: dict, with_: dict[str, str]) -> tuple[int, dict[str, str], str, str]:
        """(exit code of the failing or last step, action outputs, step summary, combined output)."""
        action = yaml.safe_load((ROOT / "action.yml").read_text())
        event_path = self.workdir / "event.json"
        event_path.write_text(json.dumps(payload))
        summary = self.workdir / "summary.md"
        summary.write_text("")
        contexts: dict = {"github": {"token": self.github["token"]}, "runner": {"temp": str(self.temp)}, "steps": {},
                          "secrets": self.secrets}
        contexts["inputs"] = {name: self.evaluate(with_.get(name, spec.get("default", "")), contexts)
                              for name, spec in action["inputs"].items()}
        base_env = {**self.env, "GITHUB_EVENT_NAME": event, "GITHUB_EVENT_PATH": str(event_path),
                    "GITHUB_ACTION_PATH": str(ROOT), "RUNNER_TEMP": str(self.temp),
                    "GITHUB_STEP_SUMMARY": str(summary), **{k: v for k, v in self.github.items() if k != "token"}}
        code, log = 0, ""
        for i, step in enumerate(action["runs"]["steps"]):
            output_file = self.workdir / f"output-{i}"
            output_file.write_text("")
            step_env = {k: self.evaluate(v, contexts) for k, v in (step.get("env") or {}).items()}
            script = self.workdir / f"step-{i}.sh"
            script.write_text(self.evaluate(step["run"], contexts))
            res = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                                 env={**base_env, **step_env, "GITHUB_OUTPUT": str(output_file)},
                                 cwd=self.workdir, capture_output=True, text=True, timeout=600)
            log += res.stdout + res.stderr
            outputs = dict(line.split("=", 1) for line in output_file.read_text().splitlines() if "=" in line)
            contexts["steps"][step.get("id", f"step{i}")] = {"outputs": outputs}
            code = res.returncode
            if code != 0:
                break
        action_outputs = {k: self.evaluate(v["value"], contexts) for k, v in action["outputs"].items()}
        return code, action_outputs, summary.read_text(), log


def job_runs(condition: str, event: str, payload: dict) -> bool:
    """Whether a job's `if:` lets `event` with `payload` through, as the runner decides it
    (https://docs.github.com/en/actions/learn-github-actions/expressions): the operators and functions the
    example workflows use (`==`, `!=`, `!`, `&&`, `||`, `startsWith`), a missing property as null, strings
    compared without case, null as ''."""
    words, at, source = [], 0, condition.strip()
    while at < len(source):
        match = TOKEN.match(source, at)
        assert match, f"cannot read the expression at {source[at:]!r}"
        word, at = match.group(1), match.end()
        if word[0] == "'":
            words.append(repr(word[1:-1].lower()))
        elif word in ("&&", "||", "!"):
            words.append({"&&": " and ", "||": " or ", "!": " not "}[word])
        elif word in ("startsWith", "==", "!=", "(", ")", ","):
            words.append(word)
        else:
            value: object = {"github": {"event_name": event, "event": payload}}
            for part in word.split("."):
                value = value.get(part) if isinstance(value, dict) else None
            words.append(repr(str(value or "").lower()))
    return bool(eval("".join(words), {"__builtins__": {}, "startsWith": str.startswith}))


@pytest.fixture(scope="session")
def action_validator() -> list[str]:
    """npm `@action-validator/cli` (SchemaStore's workflow and action schemas), pinned, cached."""
    version = "0.6.0"
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "decode-bot" / f"action-validator-{version}"
    binary = home / "node_modules" / ".bin" / "action-validator"
    if not binary.exists():
        home.mkdir(parents=True, exist_ok=True)
        res = subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(home),
                              f"@action-validator/cli@{version}", f"@action-validator/core@{version}"],
                             capture_output=True, text=True, timeout=300)
        if res.returncode != 0 or not binary.exists():
            pytest.fail(f"cannot install @action-validator/cli@{version} from npm: {res.stderr.strip()}")
    return [str(binary)]


@pytest.fixture(scope="session")
def runner_temp(tmp_path_factory) -> Path:
    """Shared across tests (and the modules that import this fixture: one fixed directory), so the
    action's install step reuses its virtualenv after the first test."""
    path = tmp_path_factory.getbasetemp() / "runner-temp"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture
def runner(fake_github, fake_anthropic, tmp_path, runner_temp):
    files = {p.name: p.read_text() for p in (EXAMPLE / "repo").iterdir()}
    fake_github.add_repo(OWNER, NAME, files)
    for login, role in (("alice", "write"), ("rita", "read")):
        fake_github.add_user(login)
        fake_github.set_permission(OWNER, NAME, login, role)
    github = {"token": fake_github.token, "GITHUB_REPOSITORY": REPO, "GITHUB_API_URL": fake_github.api_url,
              "GITHUB_SERVER_URL": fake_github.web_url, "GITHUB_RUN_ID": "4242", "GITHUB_ACTIONS": "true",
              "GITHUB_WORKFLOW": "decode-bot", "GITHUB_ACTOR": "alice"}
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), "CI": "true",
           "ANTHROPIC_BASE_URL": fake_anthropic.url}
    (tmp_path / "work").mkdir()
    return Runner(tmp_path / "work", runner_temp, github, env)


def rewritten(event: str, action: str | None, sender: str = "alice", sender_type: str = "User", **changes) -> dict:
    return example(event, action, repo=REPO, sender=sender, sender_type=sender_type, **changes)

