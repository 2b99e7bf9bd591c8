"""The sandbox's copy is checked out while the sandbox starts (bot.workspace.clone, `background`): the real
pipeline under docker, which hands the workspace to the sandbox's uid once its files are all in place."""

from __future__ import annotations

from pathlib import Path

from bot.config import Settings
from bot.model.scripted import ScriptedModel
from bot.run.pipeline import Job, execute
from bot.run.transcript import load_events
from tests.conftest import make_repo
from tests.sandbox.conftest import require

FILES = 3000
LOOK = ("find . -path ./.git -prune -o -type f -print | wc -l; "
        "find . -path ./.git -prune -o ! -user \"$(id -u)\" -print | wc -l; "
        "echo changed >> pkg07/module00007.py && echo edited")


def test_a_docker_sandbox_started_during_the_checkout_sees_every_file_as_its_own(tmp_path: Path) -> None:
    require("docker")
    repo = make_repo(tmp_path / "repo", {f"pkg{i % 30:02d}/module{i:05d}.py": f"x = {i}\n" for i in range(FILES)})
    model = ScriptedModel([[{"type": "tool_use", "name": "bash", "input": {"command": LOOK}}],
                           [{"type": "text", "text": "Looked."}]])
    settings = Settings(data_dir=tmp_path / "data", sandbox_mode="docker", anthropic_api_key=None)
    ran = execute(Job(repo=str(repo), task="Look at every file", branch="decode/run-look", run_id="look"),
                  settings, model=model, progress=lambda line: None)
    [result] = [e for e in load_events(ran.transcript_jsonl) if e["type"] == "tool_result"]
    files, not_owned, edited = result["output"].split()[:3]
    assert (int(files), int(not_owned), edited) == (FILES, 0, "edited"), result["output"]
    assert ran.result.changed == ("pkg07/module00007.py",)
