"""Which hosts `/decode allow` may add to `allow_domains`: what a run's refused egress offers (`allow_offer`, in
its tracking comment, pull request body or plan comment) and what a command may ask for (`checked_hosts`). Host
names only: never an IP literal (allow_domains takes names) nor a cloud metadata name. The pull request itself is
bot/github/allow.py's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bot.github.notes import code
from bot.run.repo_config import DOMAIN, PATH
from bot.sandbox.egress_policy import parse_ip

# names that reach cloud metadata services (their addresses are refused as IP literals already)
METADATA_NAMES = frozenset({"metadata", "metadata.google.internal", "metadata.goog", "instance-data",
                            "instance-data.ec2.internal", "metadata.azure.internal", "metadata.tencentyun.com"})
OFFER = "<!-- decode-bot:allow-offer -->"


def offerable(blocked: Mapping[str, int]) -> list[str]:
    """The host names among `blocked` ("host:port" -> attempts) a repository could allow, sorted; IP literals and
    metadata names never."""
    hosts = {dest.rsplit(":", 1)[0] if not dest.startswith("[") else dest for dest in blocked}
    return sorted(h.lower().rstrip(".") for h in hosts if _allowable(h.lower().rstrip(".")) is None)


def allow_offer(blocked: Mapping[str, int], command: str) -> str:
    """The sentence offering `/decode allow` for `blocked`, or "" when none of it may be allowed."""
    hosts = offerable(blocked)
    if not hosts:
        return ""
    return (f"To allow {'it' if len(hosts) == 1 else 'them'}, a writer can comment `{command} allow "
            f"{' '.join(hosts)}`: it opens a pull request adding {'it' if len(hosts) == 1 else 'them'} to "
            f"`allow_domains` in `{PATH}`. {OFFER}")


def _allowable(host: str) -> str | None:
    """Why `host` cannot go into allow_domains, or None when it can."""
    if parse_ip(host) is not None:
        return f"{code(host)} is an address: allow_domains takes host names only"
    if host in METADATA_NAMES or host.endswith(".internal") and "metadata" in host:
        return f"{code(host)} is a cloud metadata service, which decode-bot never lets the agent reach"
    if not DOMAIN.fullmatch(host) or "." not in host.removeprefix("*."):
        return f"{code(host[:100])} is not a host name like packages.example.com or *.files.example.com"
    return None


def checked_hosts(hosts: Sequence[str]) -> tuple[str, ...] | str:
    """The hosts of a command, lowercased and deduplicated, or why one of them cannot be allowed."""
    if not hosts:
        return "`allow` needs the host names to allow, like `/decode allow packages.example.com`"
    names = tuple(dict.fromkeys(h.lower().rstrip(".") for h in hosts))
    for host in names:
        if (why := _allowable(host)) is not None:
            return why
    return names
