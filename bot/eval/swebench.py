"""SWE-bench instances in `decode eval`: reading them, the check that judges them, and the files the official
harness reads (`predictions.jsonl`, `report.json`).

An instance is a task whose check applies its `test_patch` (only in the check's own sandbox, never in the
agent's: the agent gets `problem_statement` and the repository at `base_commit`) and runs its test command;
each test's status is read from the output as SWE-bench's pytest log parser reads it (`PASSED id`, `FAILED
id - reason`, ... as `pytest -rA` prints them). It is resolved, by SWE-bench's rule, when every
FAIL_TO_PASS test passes (PASSED or XFAIL) and every PASS_TO_PASS test still does (or is SKIPPED); a test
missing from the output counts as failed. docs/eval.md is the user's guide.
"""

from __future__ import annotations

import json
import re
import secrets
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot import __version__
from bot.core.errors import ConfigError
from bot.eval.runner import Outcome
from bot.eval.tasks import Task

REQUIRED = ("instance_id", "repo", "base_commit", "problem_statement", "FAIL_TO_PASS", "PASS_TO_PASS", "test_patch")
OPTIONAL = ("created_at", "version", "test_cmd")
PASSING = ("PASSED", "XFAIL")  # a FAIL_TO_PASS test that ends so passes
KEPT = (*PASSING, "SKIPPED")  # a PASS_TO_PASS test that ends so is not a regression
STATUSES = ("FAILED", "PASSED", "SKIPPED", "ERROR", "XFAIL")  # SWE-bench's TestStatus values
APPLY_FAILED = ">>>>> Patch Apply Failed"  # SWE-bench's marker for a patch that does not apply
HARNESS = f"decode-bot {__version__} (decode eval)"
PREDICTIONS, REPORT = "predictions.jsonl", "report.json"


@dataclass(frozen=True)
class Instance:
    """One SWE-bench instance, as much of it as the evaluation uses (the gold `patch` and hints are left out)."""

    instance_id: str
    repo: str
    base_commit: str
    problem_statement: str
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    test_patch: str
    test_cmd: str
    created_at: str | None = None
    version: str | None = None

    def task(self) -> Task:
        """The instance as a task: the agent sees the problem statement, the check holds the test patch."""
        return Task(id=self.instance_id, repo=self.repo, base=self.base_commit, task=self.problem_statement,
                    check=check_command(self.base_commit, self.test_patch, self.test_cmd))

    def judge(self, output: str) -> bool:
        """Whether a check's `output` resolves the instance (SWE-bench's rule)."""
        return resolved(parse_statuses(output), self.fail_to_pass, self.pass_to_pass)


def is_instance_file(path: Path) -> bool:
    """Whether the task file at `path` holds SWE-bench instances (its first object has `instance_id`)."""
    try:
        with open(path, encoding="utf-8") as f:
            head = f.read(65536).lstrip()
    except (OSError, UnicodeDecodeError):
        return False
    return head.startswith("[") or '"instance_id"' in head.split("\n", 1)[0]


def read_instances(path: Path, test_cmd: str | None) -> list[Instance]:
    """The instances of `path` (JSONL, or a JSON list as the dataset is exported); each instance's own
    `test_cmd` wins over `test_cmd` (--test-cmd). A `ConfigError` names the first bad one and the fix."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read the instances ({e}): give a SWE-bench JSONL or JSON file") from None
    try:
        rows: list[Any] = json.loads(text) if text.lstrip().startswith("[") else \
            [json.loads(line) for line in text.splitlines() if line.strip()]
    except ValueError as e:
        raise ConfigError(f"{path}: not JSON ({e}): write one SWE-bench instance a line") from None
    instances, seen = [], set()
    for n, row in enumerate(rows, 1):
        instance = _instance(row, f"{path}: instance {n}", test_cmd)
        if instance.instance_id in seen:
            raise ConfigError(f"{path}: instance {n}: the instance_id {instance.instance_id!r} is used twice")
        seen.add(instance.instance_id)
        instances.append(instance)
    if not instances:
        raise ConfigError(f"{path}: no instances in it")
    return instances


def _instance(row: Any, where: str, test_cmd: str | None) -> Instance:
    """One row as an `Instance`; FAIL_TO_PASS and PASS_TO_PASS as lists or JSON-encoded lists (the dataset's)."""
    if not isinstance(row, dict):
        raise ConfigError(f"{where}: not an object: each instance is a JSON object")
    missing = [name for name in REQUIRED if name not in row]
    if missing:
        raise ConfigError(f"{where}: the field {missing[0]!r} is missing: an instance has {', '.join(REQUIRED)}")
    for name in ("instance_id", "repo", "base_commit", "problem_statement", "test_patch"):
        if not isinstance(row[name], str) or not row[name].strip():
            raise ConfigError(f"{where}: the field {name!r} must be a non-empty string")
    tests = {name: _test_ids(row[name], f"{where}: {name}") for name in ("FAIL_TO_PASS", "PASS_TO_PASS")}
    if not tests["FAIL_TO_PASS"]:
        raise ConfigError(f"{where}: FAIL_TO_PASS is empty: an instance needs a test its fix makes pass")
    command = row.get("test_cmd") or test_cmd
    if not isinstance(command, str) or not command.strip():
        raise ConfigError(f"{where}: no test command: give --test-cmd 'python3 -m pytest -rA' or a `test_cmd` "
                          "field")
    optional = {name: row.get(name) if isinstance(row.get(name), str) else None for name in ("created_at", "version")}
    return Instance(row["instance_id"], row["repo"], row["base_commit"], row["problem_statement"],
                    tests["FAIL_TO_PASS"], tests["PASS_TO_PASS"], row["test_patch"], command, **optional)


def _test_ids(value: Any, where: str) -> tuple[str, ...]:
    """A list of test ids, given as a list or as its JSON text."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise ConfigError(f"{where}: not a JSON list of test ids") from None
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise ConfigError(f"{where}: give a list of test ids (strings)")
    return tuple(value)


def check_command(base: str, test_patch: str, test_cmd: str) -> str:
    """A shell command that restores the files `test_patch` changes to their state at `base` (whatever the
    agent did to them, as SWE-bench's eval script does), applies it, and runs `test_cmd`."""
    end = "DECODE_TEST_PATCH_" + secrets.token_hex(6).upper()
    body = test_patch if test_patch.endswith("\n") else test_patch + "\n"
    touched = sorted(set(re.findall(r"^--- a/(.+?)\s*$", test_patch, flags=re.MULTILINE)))
    restore = [f"git checkout -q {shlex.quote(base)} -- {shlex.quote(path)} 2>/dev/null || true" for path in touched]
    apply = f"git apply --whitespace=nowarn - <<'{end}' || {{ echo '{APPLY_FAILED}'; exit 97; }}"
    return "\n".join([*restore, f"{apply}\n{body}{end}", test_cmd])


def parse_statuses(log: str) -> dict[str, str]:
    """Test id -> status from a pytest `-rA` output, as SWE-bench's `parse_log_pytest` reads it."""
    statuses: dict[str, str] = {}
    for line in log.split("\n"):
        if not line.startswith(STATUSES):
            continue
        if line.startswith("FAILED"):
            line = line.replace(" - ", " ")
        words = line.split()
        if len(words) <= 1 or (words[0] == "SKIPPED" and re.fullmatch(r"\[\d+\]", words[1])):
            continue
        statuses[words[1]] = words[0]
    return statuses


def resolved(statuses: dict[str, str], fail_to_pass: Sequence[str], pass_to_pass: Sequence[str]) -> bool:
    """SWE-bench's rule: every FAIL_TO_PASS test passes and every PASS_TO_PASS test still does."""
    return all(statuses.get(t) in PASSING for t in fail_to_pass) and all(statuses.get(t) in KEPT for t in pass_to_pass)


def model_name(settings_model: str) -> str:
    """`model_name_or_path`: the agent and its model, as the harness names a run's directory."""
    return f"decode-bot__{settings_model}"


def write_outputs(out: Path, instances: Sequence[Instance], outcomes: Sequence[Outcome], model: str) -> Path:
    """DIR/predictions.jsonl (one line per instance the model was asked about) and DIR/report.json (SWE-bench's
    keys, schema 2, plus the harness, the model and each instance's date); the report's path."""
    name = model_name(model)
    asked = [o for o in outcomes if o.transcript is not None]
    with open(out / PREDICTIONS, "w", encoding="utf-8") as f:
        for o in asked:
            f.write(json.dumps({"instance_id": o.id, "model_name_or_path": name, "model_patch": o.patch or ""},
                               ensure_ascii=False) + "\n")
    empty = {o.id for o in asked if not o.patch}
    ids = {status: sorted(o.id for o in outcomes if o.status == status and o.id not in empty)
           for status in ("resolved", "unresolved")}
    errors = sorted(o.id for o in outcomes if o.status in ("error", "invalid") and o.id not in empty)
    completed = sorted(ids["resolved"] + ids["unresolved"])
    report = {
        "total_instances": len(instances), "submitted_instances": len(asked), "completed_instances": len(completed),
        "resolved_instances": len(ids["resolved"]), "unresolved_instances": len(ids["unresolved"]),
        "empty_patch_instances": len(empty), "error_instances": len(errors),
        "completed_ids": completed,
        "incomplete_ids": sorted({i.instance_id for i in instances} - {o.id for o in asked}),
        "empty_patch_ids": sorted(empty), "submitted_ids": sorted(o.id for o in asked),
        "resolved_ids": ids["resolved"], "unresolved_ids": ids["unresolved"], "error_ids": errors,
        "schema_version": 2,
        "harness_version": HARNESS, "model_name_or_path": name,
        "instances": {i.instance_id: {"created_at": i.created_at, "version": i.version} for i in instances},
    }
    path = out / REPORT
    path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path
