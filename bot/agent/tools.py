"""Tools as values: a run's `Toolset` is the tools its model is offered, in a stable order, and how each runs.

The six tools of the contract are `DEFAULT_TOOLS`; `READ_ONLY_TOOLS` (read, glob,
grep and a bash whose workspace changes the run discards) is the same loop's
toolset for a run that must change nothing; MCP servers add tools of their own
(bot/agent/mcp.py) with `Toolset.plus`. A name defined twice is refused.

Each tool turns a model's `tool_use` input into sandbox calls and returns an
`Observation`: text for the model plus whether it is an error. `Toolset.call`
redacts the whole text first and only then truncates it, so a secret cut at the
truncation boundary never shows a prefix the redactor could no longer recognise. Nothing here
raises for a failed command, a missing file or a refused path; those are
observations the model can act on. Only a dead sandbox (`SandboxError` other
than a refusal) escapes, since the run cannot go on without one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from bot.agent.truncate import truncate
from bot.sandbox.protocol import Refused, Sandbox
from bot.core.utf8 import utf8_safe

DEFAULT_TIMEOUT_S = 120.0
MAX_TIMEOUT_S = 600.0
READ_LIMIT_LINES = 2000


@dataclass(frozen=True)
class Observation:
    """A tool call's answer: text for the model, whether it failed, and images (Messages API image blocks; an
    MCP tool's)."""

    text: str
    is_error: bool = False
    images: tuple[dict[str, Any], ...] = ()

    def content(self) -> str | list[dict[str, Any]]:
        """The `tool_result` block's content."""
        text = self.text or "(no output)"
        return [{"type": "text", "text": text}, *self.images] if self.images else text


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


_STR = {"type": "string"}

_SCHEMAS: list[dict[str, Any]] = [
    {
        "name": "bash",
        "description": (
            "Run a bash command in the workspace root and return its combined stdout and stderr "
            "and exit code. Each call starts a fresh shell (cd and variables do not persist); "
            "background processes are stopped when the command returns. Long output is truncated "
            "in the middle. Non-interactive: never wait for input."
        ),
        "input_schema": _schema(
            {
                "command": {**_STR, "description": "The command line to run."},
                "timeout": {"type": "number", "description": f"Seconds before the command is killed (default {DEFAULT_TIMEOUT_S:.0f}, max {MAX_TIMEOUT_S:.0f})."},
            },
            ["command"],
        ),
    },
    {
        "name": "read",
        "description": "Read a text file, with line numbers. Use offset and limit for large files.",
        "input_schema": _schema(
            {
                "path": {**_STR, "description": "Path relative to the workspace root."},
                "offset": {"type": "integer", "description": "First line to read, 1-based."},
                "limit": {"type": "integer", "description": f"Number of lines (default {READ_LIMIT_LINES})."},
            },
            ["path"],
        ),
    },
    {
        "name": "write",
        "description": "Create or overwrite a file with the given content; parent directories are created.",
        "input_schema": _schema(
            {"path": {**_STR, "description": "Path relative to the workspace root."}, "content": _STR},
            ["path", "content"],
        ),
    },
    {
        "name": "edit",
        "description": (
            "Replace old_string with new_string in a file. old_string must match exactly "
            "(whitespace included) and be unique in the file unless replace_all is true."
        ),
        "input_schema": _schema(
            {
                "path": {**_STR, "description": "Path relative to the workspace root."},
                "old_string": _STR,
                "new_string": _STR,
                "replace_all": {"type": "boolean", "description": "Replace every occurrence."},
            },
            ["path", "old_string", "new_string"],
        ),
    },
    {
        "name": "glob",
        "description": "List files matching a glob pattern (** spans directories), most recently modified first.",
        "input_schema": _schema(
            {"pattern": {**_STR, "description": "e.g. **/*.py"}, "path": {**_STR, "description": "Directory to search (default: the root)."}},
            ["pattern"],
        ),
    },
    {
        "name": "grep",
        "description": "Search file contents with a regular expression (Python syntax); returns path:line:text.",
        "input_schema": _schema(
            {
                "pattern": {**_STR, "description": "Regular expression."},
                "path": {**_STR, "description": "File or directory to search (default: the root)."},
                "glob": {**_STR, "description": "Only files whose name matches, e.g. *.py"},
            },
            ["pattern"],
        ),
    },
]


def bash(sb: Sandbox, args: dict[str, Any], time_left: float) -> Observation:
    timeout = min(float(args.get("timeout") or DEFAULT_TIMEOUT_S), MAX_TIMEOUT_S, max(time_left, 1.0))
    result = sb.run(str(args["command"]), timeout=timeout)
    output = result.output
    if result.timed_out:
        return Observation(f"{output}\n[killed after {timeout:.0f}s timeout]", is_error=True)
    return Observation(f"{output}\n[exit code {result.exit_code}]", is_error=result.exit_code != 0)


def read(sb: Sandbox, args: dict[str, Any], time_left: float) -> Observation:
    text = sb.read_file(str(args["path"])).decode("utf-8", "replace")
    lines = text.splitlines()
    offset = max(int(args.get("offset") or 1), 1)
    limit = max(int(args.get("limit") or READ_LIMIT_LINES), 1)
    chosen = lines[offset - 1 : offset - 1 + limit]
    if not lines:
        return Observation("(empty file)")
    body = "".join(f"{n:6}\t{line}\n" for n, line in enumerate(chosen, offset))
    rest = len(lines) - (offset - 1 + len(chosen))
    if rest > 0:
        body += f"[{rest} more lines; read with offset={offset + len(chosen)}]\n"
    return Observation(body)


def write(sb: Sandbox, args: dict[str, Any], time_left: float) -> Observation:
    content = str(args["content"])
    sb.write_file(str(args["path"]), content.encode())
    return Observation(f"wrote {len(content.encode())} bytes to {args['path']}")


def edit(sb: Sandbox, args: dict[str, Any], time_left: float) -> Observation:
    path, old, new = str(args["path"]), str(args["old_string"]), str(args["new_string"])
    text = sb.read_file(path).decode("utf-8")
    count = text.count(old) if old else 0
    if count == 0:
        return Observation(f"old_string was not found in {path}; read the file and copy the text exactly", True)
    if count > 1 and not args.get("replace_all"):
        return Observation(
            f"old_string occurs {count} times in {path}; add surrounding lines to make it unique "
            "or set replace_all", True
        )
    sb.write_file(path, text.replace(old, new).encode())
    return Observation(f"replaced {count if args.get('replace_all') else 1} occurrence(s) in {path}")


def glob(sb: Sandbox, args: dict[str, Any], time_left: float) -> Observation:
    paths = sb.glob(str(args["pattern"]), str(args.get("path") or "."))
    return Observation("\n".join(paths) if paths else "no files match")


def grep(sb: Sandbox, args: dict[str, Any], time_left: float) -> Observation:
    matches = sb.grep(str(args["pattern"]), str(args.get("path") or "."), args.get("glob") or None)
    return Observation("\n".join(matches) if matches else "no matches")


Run = Callable[[Sandbox, dict[str, Any], float], Observation]  # (sandbox, the call's input, seconds left)


@dataclass(frozen=True)
class Tool:
    """One tool: what the model is offered (`schema`: name, description, input_schema, as the Messages API takes
    them) and how a call is carried out (`run`)."""

    schema: Mapping[str, Any]
    run: Run

    @property
    def name(self) -> str:
        return str(self.schema["name"])


@dataclass(frozen=True, eq=False)
class Toolset:
    """The tools one run offers, in the order the model sees them (the order is part of the prompt's cached
    prefix, so it never changes within a run), and whether the run keeps its workspace changes (False: a
    read-only run's changes are discarded, nothing is handed back)."""

    tools: tuple[Tool, ...]
    keeps_changes: bool = True
    _by_name: dict[str, Tool] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        by_name: dict[str, Tool] = {}
        for tool in self.tools:
            if tool.name in by_name:
                raise ValueError(f"the tool {tool.name} is defined twice")
            by_name[tool.name] = tool
        object.__setattr__(self, "_by_name", by_name)

    @property
    def names(self) -> list[str]:
        return [tool.name for tool in self.tools]

    @property
    def schemas(self) -> list[dict[str, Any]]:
        """The `tools` of a Messages API request, in the toolset's order."""
        return [dict(tool.schema) for tool in self.tools]

    def plus(self, tools: Iterable[Tool]) -> "Toolset":
        """This toolset with `tools` after its own (a `ValueError` for a name it has already)."""
        return replace(self, tools=(*self.tools, *tools))

    def only(self, names: Iterable[str], *, keeps_changes: bool) -> "Toolset":
        """The tools of this toolset named in `names`, in this toolset's order."""
        chosen = set(names)
        return Toolset(tuple(t for t in self.tools if t.name in chosen), keeps_changes)

    def call(self, sb: Sandbox, name: str, args: Any, *, time_left: float,
             redact: Callable[[str], str] = lambda text: text) -> Observation:
        """Run tool `name`; every failure the model can fix comes back as an error observation.

        The text is passed through `redact` whole, then truncated to fit the model's context.
        """
        obs = self._call(sb, name, args, time_left)
        return Observation(truncate(redact(utf8_safe(obs.text))), obs.is_error, obs.images)

    def _call(self, sb: Sandbox, name: str, args: Any, time_left: float) -> Observation:
        tool = self._by_name.get(name)
        if tool is None:
            return Observation(f"unknown tool {name!r}; the tools are {', '.join(self.names)}", True)
        if not isinstance(args, dict):
            return Observation(f"the input of {name} must be an object", True)
        try:
            return tool.run(sb, args, time_left)
        except Refused as e:
            return Observation(str(e), True)
        except KeyError as e:
            return Observation(f"{name} needs the parameter {e.args[0]}", True)
        except (TypeError, ValueError) as e:
            return Observation(f"{name}: invalid input ({e})", True)


_RUNS: dict[str, Run] = {"bash": bash, "read": read, "write": write, "edit": edit, "glob": glob, "grep": grep}
DEFAULT_TOOLS = Toolset(tuple(Tool(schema, _RUNS[schema["name"]]) for schema in _SCHEMAS))
_DISCARDED = (" This run is read-only: whatever a command changes in the workspace is discarded at its end; use "
              "commands to inspect, build and test, not to make the change.")
READ_ONLY_TOOLS = Toolset(
    tuple(Tool({**t.schema, "description": t.schema["description"] + _DISCARDED}, t.run) if t.name == "bash" else t
          for t in DEFAULT_TOOLS.tools if t.name in ("bash", "read", "glob", "grep")),
    keeps_changes=False)
