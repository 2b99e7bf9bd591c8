import logging
import os
import time
from pathlib import Path

import pytest

from bot.agent.loop import AgentResult
from bot.agent.tools import READ_ONLY_TOOLS
from bot.config import Settings
from bot.core.errors import ConfigError
from bot.model.scripted import ScriptedModel
from bot.run.pipeline import Job, execute
from bot.run.result import read_record
from tests.conftest import make_repo
from tests.fakes.anthropic_api import FakeAnthropic


class RefusedKey(ScriptedModel):
    """A model whose preflight refuses the key, as the API answers 401."""

    def check(self) -> None:
        raise ConfigError("ANTHROPIC_API_KEY was refused (401): check the key")


def test_a_run_that_cannot_start_leaves_a_failed_result_in_record_json(tmp_path):
    settings = Settings(data_dir=tmp_path / "data", sandbox_mode="local")
    job = Job(repo=str(tmp_path / "repo"), task="t", branch="decode/run-r1", run_id="r1")
    with pytest.raises(ConfigError) as raised:
        execute(job, settings.run, client=RefusedKey([]), progress=lambda line: None)
    record = read_record(tmp_path / "data" / "runs" / "r1")
    assert record is not None and (record.run_id, record.state, record.stop_reason) == ("r1", "failed", "error")
    assert record.error == str(raised.value) and record.figures is None and record.branch == "decode/run-r1"


class Watching(ScriptedModel):
    """A one-turn session that notes, at the first request, whether an earlier run's directory is still there."""

    def __init__(self, earlier: Path) -> None:
        super().__init__([[{"type": "text", "text": "Nothing to do."}]], name="scripted-watching")
        self.earlier = earlier
        self.earlier_there_at_first_request: bool | None = None

    def complete(self, **request):
        if self.earlier_there_at_first_request is None:
            self.earlier_there_at_first_request = self.earlier.exists()
        return super().complete(**request)


def test_earlier_runs_are_pruned_beside_the_run_not_before_its_first_model_request(tmp_path):
    settings = Settings(data_dir=tmp_path / "data", sandbox_mode="local", keep_days=1)
    earlier = tmp_path / "data" / "runs" / "old-run"
    for d in range(120):  # an earlier run's two kept clones: 48,000 files, so deleting them takes a while (16,000
        # were deleted before a run with a mirror reached its model, once in 8 tries)
        (earlier / "clean" / f"d{d}").mkdir(parents=True)
        for f in range(400):
            (earlier / "clean" / f"d{d}" / f"f{f}.py").write_text("x = 1\n")
    month_ago = time.time() - 30 * 86400
    os.utime(earlier, (month_ago, month_ago))
    os.utime(earlier / "clean", (month_ago, month_ago))
    model = Watching(earlier)
    job = Job(repo=str(make_repo(tmp_path / "repo", {"a.py": "a = 1\n"})), task="t", branch="decode/run-r2",
              run_id="r2")
    execute(job, settings.run, client=model, progress=lambda line: None)
    assert model.earlier_there_at_first_request is True  # the model was asked while the deletion went on
    assert not earlier.exists()  # and the run did not end before it was done


def test_a_run_looks_its_model_up_once_and_says_once_when_the_endpoint_has_no_models_api(tmp_path, caplog):
    """A compatible endpoint without the Models API (its model thinks as the built-in figures say): the one lookup
    (thinking and the context window both read its answer) is a 404, and the run goes on with the built-in
    figures, saying so in one log line."""
    job = Job(repo=str(make_repo(tmp_path / "repo", {"a.py": "a = 1\n"})), task="t", branch="decode/run-r3",
              run_id="r3")
    caplog.set_level(logging.WARNING, logger="bot.model.anthropic")
    with FakeAnthropic(models_api=False, thinking={"enabled"}) as fake:
        fake.script([[{"type": "text", "text": "Nothing to do."}]])
        settings = fake.settings(data_dir=tmp_path / "data", sandbox_mode="local")
        ran = execute(job, settings.run, progress=lambda line: None)
    assert ran.result.stop_reason == "completed", ran.result.error
    assert [r.status for r in fake.model_lookups] == [404]
    model = settings.model.name
    said = [r.getMessage() for r in caplog.records if "Models API" in r.getMessage()]
    assert said == [f"the Models API did not describe {model} (answered 404 not_found_error: Not Found: GET "
                    f"/v1/models/{model}): using the built-in figures of its family"]


def test_a_read_only_run_offers_four_tools_and_hands_nothing_back(tmp_path):
    """The read-only toolset is the same loop with another value: its bash may write, and nothing comes back."""
    turns = [[{"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": "echo 2 > a.py; cat a.py"}}],
             [{"type": "text", "text": "a.py holds a = 1."}]]
    model = ScriptedModel(turns)
    job = Job(repo=str(make_repo(tmp_path / "repo", {"a.py": "a = 1\n"})), task="t", branch="decode/run-ro",
              run_id="ro", tools=READ_ONLY_TOOLS)
    seen: list[dict] = []
    ran = execute(job, Settings(data_dir=tmp_path / "data", sandbox_mode="local").run, client=model,
                  progress=lambda line: None, watch=seen.append)
    assert [e["tools"] for e in seen if e["type"] == "model_request"] == [["bash", "read", "glob", "grep"]] * 2
    assert ran.result.commit is None and ran.result.changed == () and ran.agent.completed
