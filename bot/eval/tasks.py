"""A task file: one JSON object a line, `{"id", "repo", "base", "task", "check"}` (docs/eval.md).

Every field is a non-empty string; `repo` is a local path, a git URL or OWNER/NAME, `base` a commit or
branch, `check` a shell command that exits 0 when the task is resolved. A bad line is a `ConfigError`
naming the file, the line and the fix, before anything runs.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from bot.core.errors import ConfigError

FIELDS = ("id", "repo", "base", "task", "check")


@dataclass(frozen=True)
class Task:
    """One line of a task file."""

    id: str
    repo: str
    base: str
    task: str
    check: str

    def to_line(self) -> str:
        """The task as its line in a task file."""
        return json.dumps(asdict(self), ensure_ascii=False)


def read_tasks(path: Path) -> list[Task]:
    """The tasks of the file at `path`, in file order (blank lines skipped); a `ConfigError` for the first
    line that is not a task, an id used twice, or a file without any."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the task file ({e.strerror}): give the path of a TASKS.jsonl") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text: a task file holds one JSON object a line") from None
    tasks: list[Task] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        task = parse_line(line, f"{path}:{number}")
        if task.id in seen:
            raise ConfigError(f"{path}:{number}: the id {task.id!r} is also on line {seen[task.id]}: give each task "
                              "its own id")
        seen[task.id] = number
        tasks.append(task)
    if not tasks:
        raise ConfigError(f"{path}: no tasks in it: write one JSON object a line with the fields {', '.join(FIELDS)}")
    return tasks


def parse_line(line: str, where: str) -> Task:
    """One line as a `Task`; `where` ("FILE:LINE") starts the error of a line that is not one."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{where}: not JSON ({e.msg} at column {e.colno}): write one JSON object a line") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: a {type(data).__name__}, not an object: write "
                          '{"id", "repo", "base", "task", "check"} on each line')
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise ConfigError(f"{where}: unknown field {unknown[0]!r}: the fields are {', '.join(FIELDS)}")
    for name in FIELDS:
        if name not in data:
            raise ConfigError(f"{where}: the field {name!r} is missing: every task has {', '.join(FIELDS)}")
        value = data[name]
        if not isinstance(value, str):
            raise ConfigError(f"{where}: the field {name!r} is a {_json_type(value)}: give it as a string")
        if not value.strip():
            raise ConfigError(f"{where}: the field {name!r} is blank: give it a value")
    return Task(**{name: data[name] for name in FIELDS})


def _json_type(value: object) -> str:
    return {bool: "boolean", int: "number", float: "number", list: "list", dict: "object",
            type(None): "null"}.get(type(value), type(value).__name__)
