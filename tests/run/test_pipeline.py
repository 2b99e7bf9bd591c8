import pytest

from bot.agent.loop import AgentResult
from bot.config import Settings
from bot.core.errors import ConfigError
from bot.model.scripted import ScriptedModel
from bot.run.pipeline import Job, commit_message, execute
from bot.run.result import read_record


def test_commit_messages_mark_incomplete_work():
    job = Job(repo=".", task="Make the retry count configurable\nmore detail", branch="b", run_id="r")
    done = commit_message(job, AgentResult("completed", "Added RETRIES."))
    assert done.startswith("decode: Make the retry count configurable\n\nAdded RETRIES.")
    capped = commit_message(job, AgentResult("max_cost", "**Incomplete**"))
    assert capped.startswith("decode (incomplete: max_cost): Make the retry")


class RefusedKey(ScriptedModel):
    """A model whose preflight refuses the key, as the API answers 401."""

    def check(self) -> None:
        raise ConfigError("ANTHROPIC_API_KEY was refused (401): check the key")


def test_a_run_that_cannot_start_leaves_a_failed_result_in_record_json(tmp_path):
    settings = Settings(data_dir=tmp_path / "data", sandbox_mode="local")
    job = Job(repo=str(tmp_path / "repo"), task="t", branch="decode/run-r1", run_id="r1")
    with pytest.raises(ConfigError) as raised:
        execute(job, settings, model=RefusedKey([]), progress=lambda line: None)
    record = read_record(tmp_path / "data" / "runs" / "r1")
    assert record is not None and (record.run_id, record.state, record.stop_reason) == ("r1", "failed", "error")
    assert record.error == str(raised.value) and record.figures is None and record.branch == "decode/run-r1"
