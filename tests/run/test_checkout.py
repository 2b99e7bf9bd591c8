"""The sandbox's copy is checked out while the sandbox starts (bot.workspace.clone, `background`), or taken
from the tree the last run of the repository kept (bot.workspace.mirror): the real pipeline under docker,
which hands the workspace to the sandbox's uid once its files are all in place."""

from __future__ import annotations

from pathlib import Path

from bot.config import Settings
from bot.model.scripted import ScriptedModel
from bot.run.pipeline import Job, execute
from bot.run.transcript import load_events
from bot.workspace.mirror import Mirrors
from tests.conftest import git, make_repo
from tests.fakes.git_http import GitHttpServer
from tests.sandbox.conftest import require
from tests.workspace.test_mirror import TOKEN, serve

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
                  settings.run, client=model, progress=lambda line: None)
    [result] = [e for e in load_events(ran.transcript_jsonl) if e["type"] == "tool_result"]
    files, not_owned, edited = result["output"].split()[:3]
    assert (int(files), int(not_owned), edited) == (FILES, 0, "edited"), result["output"]
    assert ran.result.changed == ("pkg07/module00007.py",)


def test_the_next_run_takes_the_tree_the_last_one_kept_and_never_sees_its_work(tmp_path: Path) -> None:
    require("docker")
    work, served = serve(tmp_path)
    settings = Settings(data_dir=tmp_path / "data", sandbox_mode="docker", anthropic_api_key=None)
    mirrors = Mirrors(settings.store.data_dir / "mirrors")
    edit = "echo 'planted by run one' > README.md && echo secret > notes.txt && echo done"
    look = "cat README.md; ls; echo again >> src/app.py && echo edited"
    with GitHttpServer(served, password=TOKEN) as server:
        url = server.url + "o/r.git"
        tree = mirrors.tree(Mirrors.key(url))

        def run(run_id: str, command: str) -> tuple[str, tuple[str, ...], bool]:
            model = ScriptedModel([[{"type": "tool_use", "name": "bash", "input": {"command": command}}],
                                   [{"type": "text", "text": "Done."}]])
            ran = execute(Job(repo=url, task="Work", branch=f"decode/{run_id}", run_id=run_id, token=TOKEN),
                          settings.run, client=model, progress=lambda line: None)
            events = load_events(ran.transcript_jsonl)
            [result] = [e for e in events if e["type"] == "tool_result"]
            took = any("checkout an earlier run kept" in e.get("text", "") for e in events if e["type"] == "note")
            return result["output"], ran.result.changed, took

        assert run("one", edit)[1:] == (("README.md", "notes.txt"), False) and tree.is_dir()
        kept_readme = (tree / "README.md").stat().st_ino
        assert (tree / "README.md").read_text() == "# demo\n" and not (tree / "notes.txt").exists()
        output, changed, took = run("two", look)
    assert output.split()[:5] == ["#", "demo", "README.md", "src", "edited"], output
    assert changed == ("src/app.py",) and took  # the transcript says where the workspace came from
    assert tree.is_dir() and (tree / "README.md").stat().st_ino != kept_readme  # taken, and another one kept
    assert git(work, "rev-parse", "HEAD") == git(tree, "rev-parse", "HEAD")
