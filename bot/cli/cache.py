"""`decode cache list|clear`: the setup cache's entries in DECODE_DATA_DIR/setup-cache (bot/run/setup_cache.py)."""

from __future__ import annotations

import argparse
import sys
import time

from bot.config import Settings
from bot.core.errors import ConfigError, DecodeError


def cmd_cache(args: argparse.Namespace, settings: Settings) -> int:
    """`decode cache list|clear`: the setup cache's entries in DECODE_DATA_DIR/setup-cache (bot/run/setup_cache.py)."""
    from bot.run.setup_cache import SetupCache

    cache = SetupCache(settings.store.data_dir / "setup-cache")
    entries = cache.entries()
    if args.cache_command == "list":
        now = time.time()
        for e in entries:
            print(f"{e.key[:12]}  {e.repo}  {_age(now - e.created)} old  {e.size / 1024 / 1024:.1f} MB  "
                  f"used {_age(now - e.last_used)} ago")
        if not entries:
            print(f"the setup cache in {cache.directory} is empty", file=sys.stderr)
        return 0
    if args.all == bool(args.key):
        raise ConfigError("decode cache clear takes either a KEY (as `decode cache list` shows it) or --all")
    chosen = entries if args.all else [e for e in entries if e.key.startswith(args.key)]
    if not args.all and len(chosen) != 1:
        raise ConfigError(f"no setup cache entry has the key {args.key!r}: see `decode cache list`" if not chosen
                          else f"{args.key!r} starts {len(chosen)} keys: give more of it")
    busy = [e.key[:12] for e in chosen if not cache.remove(e)]
    print(f"removed {len(chosen) - len(busy)} setup cache entries", file=sys.stderr)
    if busy:
        raise DecodeError(f"kept {', '.join(busy)}: a sandbox is running from it; clear again after that run")
    return 0


def _age(seconds: float) -> str:
    """`seconds` as the largest whole unit: 45s, 12m, 3h, 2d."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(max(seconds, 0))}s"
