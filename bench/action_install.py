"""The GitHub Action's install step on a new runner: action.yml's step against the former pip install.

    python3 bench/action_install.py [--rounds 3] [--pip-rounds 1]

Each round starts from nothing: a new RUNNER_TEMP (so no virtualenv and no uv to reuse) and uv and pip
cache directories that are new and empty, with this machine's package index configuration. The step is
action.yml's own "Install decode-bot" (SANDBOX_MODE=local, so no bubblewrap set-up is timed): pip fetches
the pinned uv, then uv installs the core dependencies at the versions of action/constraints.txt (decode-bot
itself runs from the checkout, nothing is built). The
baseline, in the same run, is what the step did before: `python3 -m venv` and `pip install` of the
package with everything it then depended on (the server, postgres and modal extras of today). Medians,
and the ratio. Target (issue 26): the step under 8 s.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.action_install import ROOT, run_install_step, run_pip_install  # noqa: E402

TARGET_S = 8.0


def packages(venv: Path) -> int:
    """How many distributions the virtualenv holds."""
    return len(list(venv.glob("lib/python*/site-packages/*.dist-info")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of action.yml's install step")
    parser.add_argument("--pip-rounds", type=int, default=1, help="rounds of the former pip install (~25 s each)")
    args = parser.parse_args()
    step, pip, count = [], [], 0
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="decode-bench-install-") as top:
            took, venv = run_install_step(Path(top))
            step.append(took)
            count = packages(venv)
    for _ in range(args.pip_rounds):
        with tempfile.TemporaryDirectory(prefix="decode-bench-install-") as top:
            pip.append(run_pip_install(Path(top), f"{ROOT}[server,postgres,modal]"))
    print(f"{'install':<44} {'median s':>9} {'min-max s':>12} {'rounds':>7}")
    for name, times in ((f"action.yml step (uv, pinned: {count} packages)", step),
                        ("former step (pip, every dependency)", pip)):
        if times:  # --pip-rounds 0 (the smoke run, tests/bench): no baseline
            print(f"{name:<44} {statistics.median(times):>9.2f} {f'{min(times):.1f}-{max(times):.1f}':>12} "
                  f"{len(times):>7}")
    new = statistics.median(step)
    ratio = f"ratio {new / statistics.median(pip):.2f} (the step takes {new / statistics.median(pip):.0%} of the " \
        "former); " if pip else ""
    print(f"{ratio}the step is {'within' if new < TARGET_S else 'OVER'} the {TARGET_S:.0f} s target")


if __name__ == "__main__":
    main()
