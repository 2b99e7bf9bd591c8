"""Publishing a signed commit through GitHub's API against `git push` of the same commit (issue 38).

    python3 bench/publish_scale.py [--files 1,100,1000] [--rounds 3] [--latency-ms 50] [--smoke]

The fake GitHub (tests/fakes/github.py) serves both the REST API and git's smart HTTP, with `--latency-ms`
added to every request, as a distant GitHub would. For each size, one commit changing that many text files
(plus an executable, a symlink, a binary file and a deletion) is published through the API by the real
`GitHubForge` (PyGithub) and pushed with git from the same clone to another branch; the baseline is the
push, measured in the same run. Printed: requests and content-creating requests made, wall time, and the
ratio to the push. Target: 1,000 files within 2x of `git push`, at most 10 content-creating requests.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._scale import Table, command_line, ratio, target  # noqa: E402
from bot.github.api_commit import read_commit  # noqa: E402
from bot.github.auth import TokenCredentials  # noqa: E402
from bot.github.forge import GitHubForge  # noqa: E402
from bot.workspace.clone import Workspace, prepare  # noqa: E402
from tests.fakes.github import FakeGitHub  # noqa: E402

TARGET_RATIO = 2.0
MAX_WRITES = 10


def changed_clone(fake: FakeGitHub, root: Path, files: int, tag: str) -> tuple[Workspace, str]:
    """A clone of octo/big with one commit changing `files` text files, an executable, a symlink, a binary
    file and a deletion; (the workspace, the commit)."""
    ws = prepare(fake.git_url("octo", "big"), root / tag, f"api-{tag}", token=fake.token)
    for i in range(files):
        path = ws.clean / "gen" / f"f{i}.py"
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"VALUE_{i} = {i}\n" + "# generated line\n" * 20)
    (ws.clean / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (ws.clean / "run.sh").chmod(0o755)
    (ws.clean / "link").symlink_to("README.md")
    (ws.clean / "logo.bin").write_bytes(b"\x89PNG\x00\xff" * 100)
    ws.git("add", "-A", "--", "gen", "run.sh", "link", "logo.bin", what="staging")
    ws.git("rm", "-q", "--cached", "--", "old.txt", what="deleting")
    commit = ws.commit(f"Generate {files} files")
    assert commit is not None
    return ws, commit


def one_round(fake: FakeGitHub, forge: GitHubForge, root: Path, files: int, n: int) -> dict[str, float]:
    """Time the API publish and the git push of one commit of `files` files; requests counted in the fake."""
    ws, commit = changed_clone(fake, root, files, f"{files}-{n}")
    before = len(fake.requests)
    began = time.perf_counter()
    made = read_commit(ws, commit)
    assert not isinstance(made, str), made
    forge.make_commit("octo/big", made, branch=ws.branch, force=True)  # a run's own new branch, as OpenPull
    api_s = time.perf_counter() - began
    api = fake.requests[before:]
    before = len(fake.requests)
    began = time.perf_counter()
    replace(ws, branch=f"push-{files}-{n}").push(fake.token)
    push_s = time.perf_counter() - began
    pushed = fake.requests[before:]
    return {"api_s": api_s, "push_s": push_s, "requests": len(api), "push_requests": len(pushed),
            "writes": sum(r.method in ("POST", "PATCH", "PUT", "DELETE") for r in api),
            "refused": sum(r.status in (403, 429) for r in api)}


def main(argv: list[str] | None = None) -> int:
    scale = command_line(argv, sizes=("files", "1,100,1000"), rounds=("rounds", 3), smoke=([1, 20], 1),
                         latency_ms=50.0)
    latency_ms, rounds = scale.args.latency_ms, scale.rounds
    failed = False
    with FakeGitHub() as fake, tempfile.TemporaryDirectory(prefix="decode-bench-publish-") as tmp:
        fake.add_repo("octo", "big", {"README.md": "# big\n", "old.txt": "to delete\n"})
        fake.limit_writes(80, 60.0)
        fake.latency_s = latency_ms / 1000
        forge = GitHubForge(TokenCredentials(fake.token, fake.api_url))
        print(f"latency per request: {latency_ms:.0f} ms; rounds: {rounds}; baseline: git push of the same "
              "commit, same server, same run")
        table = Table(("files", ">6"), ("requests", ">8"), ("writes", ">6"), ("refused", ">7"), ("api s", ">7.2f"),
                      ("push reqs", ">9"), ("push s", ">7.2f"), ("ratio", ">6"))
        for files in scale.sizes:
            results = [one_round(fake, forge, Path(tmp), files, n) for n in range(rounds)]
            api_s = statistics.median(r["api_s"] for r in results)
            push_s = statistics.median(r["push_s"] for r in results)
            last = results[-1]
            table.row(files, last["requests"], last["writes"], last["refused"], api_s, last["push_requests"], push_s,
                      ratio(api_s, push_s))
            failed |= last["writes"] > MAX_WRITES or last["refused"] > 0
            if files >= 1000:
                failed |= api_s / push_s > TARGET_RATIO
    target(f"at most {MAX_WRITES} content-creating requests, none refused; 1,000 files within {TARGET_RATIO:.0f}x of "
           "git push", not failed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
