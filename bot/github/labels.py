"""The trigger label in every repository the App is installed on, so that maintainers find it there.

An `installation.created` or `installation_repositories.added` delivery becomes a `Labels` job; this
creates the label where it is missing and leaves an existing one (any case, any color) alone. Each
repository is tried on its own: one that refuses (a repository the installation lost meanwhile) is
named in the result, and the others still get their label.
"""

from __future__ import annotations

import logging

from github import GithubException

from bot.core.errors import DecodeError
from bot.github.forge import Forge
from bot.github.conclusion import Conclusion
from bot.github.work import Labels

log = logging.getLogger(__name__)

COLOR = "5319e7"


def add_trigger_labels(work: Labels, forge: Forge, label: str) -> Conclusion:
    """Create `label` where it is missing in `work.repos`; failed when a repository refused it."""
    created, refused = [], []
    description = "decode-bot works on issues labeled with this and opens a pull request"
    for repo in work.repos:
        try:
            if forge.ensure_label(repo, label, color=COLOR, description=description):
                created.append(repo)
        except (GithubException, DecodeError) as e:
            log.warning("could not create the label %r on %s: %s", label, repo, e)
            refused.append(f"{repo} ({getattr(e, 'status', None) or e})")
    done = f"label {label!r} created on {len(created)} of {len(work.repos)} repositories"
    if refused:
        return Conclusion.of_job("failed", f"{done}; refused on {', '.join(refused)}")
    return Conclusion.of_job("success" if created else "no_changes", done)
