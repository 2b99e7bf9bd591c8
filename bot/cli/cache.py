"""`decode cache list|clear`: the setup cache's entries (bot/run/setup_cache.py) and the repository mirrors
(bot/workspace/mirror.py) under DECODE_DATA_DIR."""

from __future__ import annotations

import argparse
import sys
import time

from bot.config import Settings
from bot.core.errors import ConfigError, DecodeError


def cmd_cache(args: argparse.Namespace, settings: Settings) -> int:
    """`decode cache list|clear`: the setup cache's entries in DECODE_DATA_DIR/setup-cache (bot/run/setup_cache.py)
    and the repository mirrors in DECODE_DATA_DIR/mirrors (bot/workspace/mirror.py)."""
    from bot.run.setup_cache import SetupCache
    from bot.workspace.mirror import Mirrors

    cache, mirrors = SetupCache(settings.store.data_dir / "setup-cache"), Mirrors(settings.store.data_dir / "mirrors")
    entries, kept = cache.entries(), mirrors.entries()
    if args.cache_command == "list":
        now = time.time()
        for e in entries:
            print(f"{e.key[:12]}  {e.repo}  {_age(now - e.created)} old  {e.size / 1024 / 1024:.1f} MB  "
                  f"used {_age(now - e.last_used)} ago")
        for m in kept:
            kept_tree = f" with a checkout kept for the next run ({m.tree / 1024 / 1024:.1f} MB)" if m.tree else ""
            print(f"{m.key[:12]}  mirror of {m.url}{kept_tree}  {_age(now - m.created)} old  "
                  f"{m.size / 1024 / 1024:.1f} MB  used {_age(now - m.last_used)} ago")
        if not entries and not kept:
            print(f"the setup cache in {cache.directory} and the mirrors in {mirrors.directory} are empty",
                  file=sys.stderr)
        return 0
    if args.all == bool(args.key):
        raise ConfigError("decode cache clear takes either a KEY (as `decode cache list` shows it) or --all")
    chosen = entries if args.all else [e for e in entries if e.key.startswith(args.key)]
    chosen_mirrors = kept if args.all else [m for m in kept if m.key.startswith(args.key)]
    if not args.all and len(chosen) + len(chosen_mirrors) != 1:
        found = len(chosen) + len(chosen_mirrors)
        raise ConfigError(f"no setup cache entry or mirror has the key {args.key!r}: see `decode cache list`"
                          if not found else f"{args.key!r} starts {found} keys: give more of it")
    busy = [e.key[:12] for e in chosen if not cache.remove(e)] + [m.key[:12] for m in chosen_mirrors
                                                                   if not mirrors.remove(m)]
    print(f"removed {len(chosen) + len(chosen_mirrors) - len(busy)} setup cache entries and mirrors", file=sys.stderr)
    if busy:
        raise DecodeError(f"kept {', '.join(busy)}: a run is using it; clear again after that run")
    return 0


def _age(seconds: float) -> str:
    """`seconds` as the largest whole unit: 45s, 12m, 3h, 2d."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(max(seconds, 0))}s"
