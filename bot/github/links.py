"""Unguessable transcript links: `/runs/<run_id>?sig=HMAC-SHA256(server key, run_id)`.

The key lives in DECODE_DATA_DIR (`link.key`, see `keys.data_key`). A link is a capability: whoever
holds it reads that one run's transcript, so it is posted where the run's people already are (the
tracking comment) and never derived from anything public. Deleting the key revokes every link.
"""

from __future__ import annotations

import hashlib
import hmac
from urllib.parse import quote

from bot.config import Settings
from bot.core.keys import data_key
from bot.core.names import job_id

KEY_FILE = "link.key"


def signature(settings: Settings, run_id: str) -> str:
    """The hex HMAC-SHA256 of `run_id` under the server's link key."""
    key = data_key(settings.store.data_dir, KEY_FILE)
    return hmac.new(key, run_id.encode(), hashlib.sha256).hexdigest()


def valid(settings: Settings, run_id: str, sig: str | None) -> bool:
    """Whether `sig` is the signature of `run_id` (a well-formed run id); compared in constant time."""
    if not sig or job_id(run_id) is None:
        return False
    return hmac.compare_digest(signature(settings, run_id).encode(), sig.encode())


def run_path(settings: Settings, run_id: str) -> str:
    """The signed path of a run's transcript page, relative to the server root."""
    return f"/runs/{quote(run_id)}?sig={signature(settings, run_id)}"


def run_link(settings: Settings, run_id: str) -> str | None:
    """The transcript page's full URL, or None when DECODE_PUBLIC_URL is not set (nowhere to point to) or
    the run is not a job of `decode serve`'s queue (a CLI or Action run has no page)."""
    if not settings.web.public_url or job_id(run_id) is None:
        return None
    return settings.web.public_url + run_path(settings, run_id)
