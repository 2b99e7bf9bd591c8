"""What the scale benches (many_runs, transcript_page, publish_scale: issue 38) share: their command line (the
sizes, the rounds, `--smoke` for the tiny sizes CI runs) and their table of figures with a ratio to a baseline
measured in the same run, ending with the line that says whether the target holds."""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Scale:
    """The sizes and rounds a bench runs (`--smoke`: the tiny ones), and the rest of its command line."""

    sizes: list[int]
    rounds: int
    smoke: bool
    args: argparse.Namespace


def command_line(argv: Sequence[str] | None, *, sizes: tuple[str, str], rounds: tuple[str, int],
                 smoke: tuple[list[int], int], **more: object) -> Scale:
    """Parse `argv`: `--SIZES a,b,c` (`sizes`: its name and default), `--ROUNDS n`, each of `more` (a name and
    its default, whose type the option takes: `latency_ms=50.0` is `--latency-ms 50`) and `--smoke`, which
    runs `smoke`'s sizes and rounds instead. Sizes that are not whole numbers: exit 2 naming the option."""
    parser = argparse.ArgumentParser()
    parser.add_argument(f"--{sizes[0]}", default=sizes[1], help=f"comma-separated (default {sizes[1]})")
    parser.add_argument(f"--{rounds[0]}", type=int, default=rounds[1])
    for name, default in more.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(default), default=default)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, few rounds: seconds, for CI")
    args = parser.parse_args(argv)
    if args.smoke:
        return Scale(smoke[0], smoke[1], True, args)
    try:
        asked = [int(n) for n in getattr(args, sizes[0]).split(",")]
    except ValueError:
        parser.error(f"--{sizes[0]} takes whole numbers separated by commas, e.g. {sizes[1]}")
    return Scale(asked, getattr(args, rounds[0]), False, args)


def ratio(value: float, base: float) -> str:
    """`value` as a multiple of `base`, as the tables print it."""
    return f"{value / base:.2f}x"


class Table:
    """Rows of figures printed under their column titles; a column is its title and the format of its values
    (`"<9"`, `">8,"`, `">8.2f"`): the title takes the value's alignment and width."""

    def __init__(self, *columns: tuple[str, str]) -> None:
        self._formats = [spec for _, spec in columns]
        print(" ".join(format(title, re.sub(r"[^<>^0-9].*", "", spec)) for title, spec in columns))

    def row(self, *values: object) -> None:
        print(" ".join(format(value, spec) for value, spec in zip(values, self._formats, strict=True)))


def target(text: str, ok: bool) -> None:
    """The table's last line: the target and whether it held."""
    print(f"target: {text}: {'ok' if ok else 'MISSED'}")
