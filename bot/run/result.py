"""A run's result: the one frozen value every reader of a finished run reads.

The pipeline makes it when the run ends (bot/run/pipeline.py) and writes it to the run's record.json;
publishing adds its links (`Conclusion.of_run`, never a second state), and the job runner stores that in the job
store and writes it to record.json again. The dashboard, the transcript page, /metrics, the Action's
outputs, `decode run`'s last lines, `decode runs` and the Modal app's return value all read this value:
none computes a figure a second time.

Reading an older record: stores and run directories written before this value existed hold one of two
earlier shapes, the job store's `{"state", "figures": {"seconds", "tokens": {"input", ...}}}` and
record.json's flat `{"turns", "cost_usd", "wall_s", "stop_reason", ...}`. `RunResult.from_json` reads
either (and anything else JSON) without raising: each field it cannot find or read is left at its
default, so an old run shows what it recorded and blanks for the rest.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bot.agent.loop import AgentResult
from bot.core.files import write_atomic
from bot.model.protocol import Usage

RECORD = "record.json"  # in each run directory (bot/workspace/run_dirs.py)
STATES = ("success", "incomplete", "no_changes", "failed", "skipped")


@dataclass(frozen=True)
class Figures:
    """What one agent run took: turns, tokens by kind (the model's `Usage`), cost, wall time, and how many
    times its conversation was trimmed to fit the model's window (`trims`)."""

    turns: int = 0
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    seconds: float = 0.0
    trims: int = 0

    def __add__(self, other: "Figures") -> "Figures":
        """The figures of two runs together (the attempts of one task, say)."""
        return Figures(self.turns + other.turns, self.usage + other.usage, self.cost_usd + other.cost_usd,
                       self.seconds + other.seconds, self.trims + other.trims)

    @classmethod
    def of(cls, agent: AgentResult) -> "Figures":
        """The totals of an agent run (no file is read again)."""
        return cls(agent.turns, agent.usage, agent.cost_usd, agent.seconds, agent.trims)

    @classmethod
    def from_json(cls, data: object) -> "Figures | None":
        """The figures in `data`, of this shape, the job store's earlier `{"seconds", "tokens": {"input",
        ...}}` or record.json's earlier flat one (`wall_s`, no tokens)."""
        if not isinstance(data, Mapping):
            return None
        usage = found if isinstance(found := data.get("usage"), Mapping) else {}
        tokens = found if isinstance(found := data.get("tokens"), Mapping) else {}
        earlier = {"input_tokens": "input", "output_tokens": "output", "cache_read_tokens": "cache_read",
                   "cache_creation_tokens": "cache_write"}
        return cls(turns=_int(data.get("turns")), cost_usd=_float(data.get("cost_usd")),
                   seconds=_float(data.get("seconds", data.get("wall_s"))), trims=_int(data.get("trims")),
                   usage=Usage(**{k: _int(usage.get(k, tokens.get(old))) for k, old in earlier.items()}))


@dataclass(frozen=True)
class RunResult:
    """How one job's run ended: its state, where its work is, what it left out, what it cost.

    `state` is one of `STATES` (a record of an earlier shape may hold another word, or `unknown`);
    `stop_reason` is the agent loop's (bot/agent/loop.py), None when no agent ran; `figures` is None
    then too. `left_out` maps a path to why it was left out of the commit,
    `blocked` a "host:port" to the attempts the egress policy refused; `verified` is `passed`, `failed`
    or `none`. `error` is the one-line reason of a failed job; `retry_later` says it failed before it did
    anything, because GitHub did not answer, so running it again later may succeed (the job runner does)."""

    run_id: str
    state: str
    repo: str = ""
    branch: str | None = None
    attempt: int = 1
    commit: str | None = None
    changed: tuple[str, ...] = ()
    left_out: Mapping[str, str] = field(default_factory=dict)
    blocked: Mapping[str, int] = field(default_factory=dict)
    verified: str = "none"
    stop_reason: str | None = None
    figures: Figures | None = None
    pr_url: str | None = None
    error: str | None = None
    exit_code: int = 0
    finished_at: float = field(default_factory=time.time)
    restarts: tuple[str, ...] = ()  # why the sandbox died, once per restart (bot/run/restart.py)
    retry_later: bool = False

    def to_json(self) -> dict[str, Any]:
        """The value as JSON types, as record.json and the job store hold it."""
        data = asdict(self)
        data["changed"], data["left_out"], data["blocked"] = list(self.changed), dict(self.left_out), \
            dict(self.blocked)
        data["restarts"] = list(self.restarts)
        return data

    @classmethod
    def from_json(cls, data: object, *, run_id: str = "") -> "RunResult | None":
        """The result `data` holds, None when it is not a JSON object; an earlier shape (see the module's
        docstring) gives what it recorded, the rest left at the defaults. Never raises on JSON input."""
        if not isinstance(data, Mapping):
            return None
        figures = Figures.from_json(data.get("figures"))
        if figures is None and any(k in data for k in ("turns", "cost_usd", "wall_s")):
            figures = Figures.from_json(data)  # record.json before this value: flat figures
        stop_reason = _str(data.get("stop_reason"))
        commit = _str(data.get("commit"))
        state = _str(data.get("state"))
        return cls(
            run_id=_str(data.get("run_id")) or run_id,
            state=state or (state_of(stop_reason, commit) if stop_reason else "unknown"),
            repo=_str(data.get("repo")) or "", branch=_str(data.get("branch")), attempt=_int(data.get("attempt")) or 1,
            commit=commit, changed=tuple(_strs(data.get("changed"))),
            left_out=_mapping(data.get("left_out"), str), blocked=_mapping(data.get("blocked"), int),
            verified=v if (v := _str(data.get("verified"))) in ("passed", "failed") else "none",
            stop_reason=stop_reason, figures=figures, pr_url=_str(data.get("pr_url")), error=_str(data.get("error")),
            exit_code=_int(data.get("exit_code")), finished_at=_float(data.get("finished_at")),
            restarts=tuple(_strs(data.get("restarts"))), retry_later=data.get("retry_later") is True)


def state_of(stop_reason: str, commit: str | None, *, read_only: bool = False, answered: bool = True) -> str:
    """The state of a run that stopped for `stop_reason` with or without a commit, before publishing. A read-only
    run (a plan) answers instead of committing: it succeeded when it completed with an answer (`answered`)."""
    if stop_reason == "error":
        return "failed"
    if read_only:
        return "success" if stop_reason == "completed" and answered else "incomplete"
    if commit is None:
        return "no_changes"
    return "success" if stop_reason == "completed" else "incomplete"


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: object) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _float(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _strs(value: object) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _mapping(value: object, kind: type) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, kind) and not isinstance(v, bool)}


def write_record(run_dir: Path, result: RunResult) -> Path:
    """record.json: the run's result, in one small file (no secrets: its fields are redacted where they are
    made)."""
    path = run_dir / RECORD
    return write_atomic(path, json.dumps(result.to_json(), indent=1, sort_keys=True) + "\n", 0o644)


def read_record(run_dir: Path | None) -> RunResult | None:
    """The run's record.json (written when the run ended), or None while it is on, or when it is missing or
    unreadable; a record of an earlier shape reads as `RunResult.from_json` says."""
    if run_dir is None:
        return None
    try:
        data = json.loads((run_dir / RECORD).read_text())
    except (OSError, ValueError):
        return None
    return RunResult.from_json(data, run_id=run_dir.name)
