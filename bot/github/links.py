"""Unguessable, expiring transcript links: `/runs/<run_id>?exp=E&sig=HMAC-SHA256(server key, run_id, E)`.

The key lives in DECODE_DATA_DIR (`link.key`, see `keys.data_key`). A link is a capability: whoever
holds it reads that one run's transcript, so it is posted where the run's people already are (the
tracking comment) and never derived from anything public. It expires `DECODE_KEEP_DAYS` after it was
made (E, in Unix seconds, is signed with the run id), so a link copied out of a private repository
stops working about when its run directory is pruned, and someone whose access ended cannot keep
reading with it; after that, the run is seen by signing in on the dashboard. Deleting the key revokes
every link.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import time
from urllib.parse import quote

from bot.config import StoreSettings, WebSettings
from bot.core.keys import data_key
from bot.core.names import job_id

KEY_FILE = "link.key"
DAY_S = 86400


class Link(enum.Enum):
    """What a transcript link is worth: `GOOD`, `EXPIRED` (signed by this server, past its expiry) or `BAD`."""

    GOOD = "good"
    EXPIRED = "expired"
    BAD = "bad"


def signature(store: StoreSettings, run_id: str, expires: int, *, key: bytes | None = None) -> str:
    """The hex HMAC-SHA256 of `run_id` and its expiry (Unix seconds) under the server's link key (`key`: as
    read already, for a page of links)."""
    key = key if key is not None else data_key(store.data_dir, KEY_FILE)
    return hmac.new(key, f"{run_id}\n{expires}".encode(), hashlib.sha256).hexdigest()


def check(store: StoreSettings, run_id: str, expires: str | None, sig: str | None, *,
          now: float | None = None) -> Link:
    """Whether `sig` signs `run_id` (a well-formed run id) and `expires`, compared in constant time, and
    whether that expiry has passed."""
    if not sig or not expires or not expires.isascii() or not expires.isdigit() or job_id(run_id) is None:
        return Link.BAD
    if not hmac.compare_digest(signature(store, run_id, int(expires)).encode(), sig.encode()):
        return Link.BAD
    return Link.GOOD if int(expires) > (time.time() if now is None else now) else Link.EXPIRED


def run_path(store: StoreSettings, run_id: str, *, now: float | None = None) -> str:
    """The signed path of a run's transcript page, relative to the server root, valid `DECODE_KEEP_DAYS`."""
    return run_paths(store, [run_id], now=now)[run_id]


def run_paths(store: StoreSettings, run_ids: list[str], *, now: float | None = None) -> dict[str, str]:
    """`run_path` of each of `run_ids` (a dashboard page's), the key read once."""
    expires = int((time.time() if now is None else now) + store.keep_days * DAY_S)
    key = data_key(store.data_dir, KEY_FILE)
    return {run_id: f"/runs/{quote(run_id)}?exp={expires}&sig={signature(store, run_id, expires, key=key)}"
            for run_id in run_ids}


def run_link(web: WebSettings, store: StoreSettings, run_id: str) -> str | None:
    """The transcript page's full URL, or None when DECODE_PUBLIC_URL is not set (nowhere to point to) or
    the run is not a job of `decode serve`'s queue (a CLI or Action run has no page)."""
    if not web.public_url or job_id(run_id) is None:
        return None
    return web.public_url + run_path(store, run_id)
