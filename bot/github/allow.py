"""`/decode allow HOST ...`: hosts the egress proxy refused become a small pull request to decode.yml.

A run whose egress was refused offers the command (bot/github/hosts.py) in its tracking comment and pull
request body, naming only host names a repository may list. A writer's command opens a pull request against
the default branch changing only `allow_domains` in `.github/decode.yml`. The file is edited as text
(`with_hosts`), so its comments, key order and quoting stay as the maintainers wrote them; the result is parsed
back and must equal the old settings plus the hosts, or nothing is proposed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import yaml

from bot.core.errors import ConfigError
from bot.github.conclusion import Conclusion
from bot.github.forge import Forge
from bot.github.hosts import OFFER, checked_hosts
from bot.github.notes import code
from bot.github.plan import AllowHosts, Plan
from bot.run.repo_config import PATH, config_of

RUN_TAG = re.compile(r"<!-- decode-bot:run:(\S+) -->")
TRANSCRIPT = re.compile(r"📜 \[Transcript\]\((\S+)\)")


def with_hosts(text: str, hosts: Iterable[str]) -> str:
    """decode.yml's `text` with `hosts` added to `allow_domains` (those it lists already are left out), edited as
    text: a block list gets items in its own indentation, a one-line flow list gets them before its `]`, and a
    file without the key gets it at the end. ConfigError when the edit cannot be made faithfully."""
    before = config_of(text.encode(), "")
    new = [h for h in hosts if h not in before.allow_domains]
    if not new:
        return text
    lines = text.splitlines(keepends=True)
    at = next((i for i, line in enumerate(lines) if re.match(r"allow_domains\s*:", line)), None)
    if at is None:
        edited = text + ("" if not text or text.endswith("\n") else "\n") + "allow_domains:\n" + \
            "".join(f"  - {h}\n" for h in new)
    else:
        rest = lines[at].split(":", 1)[1]
        flow = re.match(r"(\s*\[)([^\]]*)(\].*)", rest, re.S)
        if flow:
            items = flow.group(2).strip()
            joined = ", ".join([items] * bool(items) + new)
            lines[at] = lines[at].split(":", 1)[0] + ":" + flow.group(1) + joined + flow.group(3)
        elif rest.strip() and not rest.strip().startswith("#"):
            raise ConfigError(f"{PATH}: allow_domains is not a list decode-bot can add to")
        else:
            end, indent, last = at + 1, "  ", at
            while end < len(lines) and (not lines[end].strip() or lines[end][:1] in (" ", "\t", "-")):
                if (item := re.match(r"(\s*)- ", lines[end])) is not None:
                    indent, last = item.group(1), end
                end += 1
            place = last + 1
            if not lines[place - 1].endswith("\n"):
                lines[place - 1] += "\n"
            lines[place:place] = [f"{indent}- {h}\n" for h in new]
        edited = "".join(lines)
    after = config_of(edited.encode(), "")
    if after.allow_domains != before.allow_domains + tuple(new) or \
            yaml.safe_load(edited) != {**(yaml.safe_load(text) or {}), "allow_domains": list(after.allow_domains)}:
        raise ConfigError(f"{PATH}: could not add to allow_domains without changing anything else; edit it by hand")
    return edited


def open_allow_pull(forge: Forge, repo: str, the_plan: Plan, *, number: int, asker: str, command: str) -> Conclusion:
    """The pull request `/decode allow` asks for, on `the_plan`'s branch against the default branch: decode.yml with
    the hosts added, naming the run whose tracking comment on issue `number` offered them."""
    delivery = the_plan.delivery
    assert isinstance(delivery, AllowHosts)
    hosts = checked_hosts(delivery.hosts)
    if isinstance(hosts, str):
        return Conclusion.of_job("skipped", f"🤷 {hosts}.")
    current = forge.file_at(repo, PATH, delivery.base)
    text = with_hosts((current or b"").decode("utf-8"), hosts)
    if current is not None and text == current.decode("utf-8"):
        return Conclusion.of_job("no_changes", f"🤷 `allow_domains` in `{PATH}` on {delivery.base} lists "
                                               f"{', '.join(map(code, hosts))} already.")
    names = ", ".join(hosts)
    forge.commit_file(repo, base=delivery.base, branch=the_plan.branch, path=PATH, content=text.encode(),
                      message=f"decode.yml: allow {names}\n\nAsked by @{asker} with `{command} allow` on #{number}.")
    body = (f"Adds {', '.join(map(code, hosts))} to `allow_domains` in `{PATH}`, as @{asker} asked with "
            f"`{command} allow` on #{number}. Nothing else in the file changes.\n\n{_needed_by(forge, repo, number)}")
    pr = forge.open_or_update_pull(repo, head=the_plan.branch, base=delivery.base, title=f"decode.yml: allow {names}",
                                   body=body, draft=False)
    return Conclusion.of_job("success", f"✅ Opened {pr.html_url}: it adds {names} to `allow_domains`.",
                             pr_url=pr.html_url, branch=the_plan.branch)


def _needed_by(forge: Forge, repo: str, number: int) -> str:
    """Which run needed the hosts: the newest tracking comment on `number` that offered `allow`."""
    found = forge.comment_text(repo, number, OFFER)
    if found is None:
        return _offered_by_pull(forge, repo, number)
    _, body, url = found
    tag = RUN_TAG.search(body)
    page = TRANSCRIPT.search(body)
    run = f"run `{tag.group(1)}`" if tag else "the run"
    return f"The egress proxy refused them during {run} ([its report]({url})" + \
        (f", [transcript]({page.group(1)}))." if page else ").")


def _offered_by_pull(forge: Forge, repo: str, number: int) -> str:
    """Which run needed the hosts when no comment on `number` offered them: the run that wrote decode-bot's pull
    request `number`, whose body offered them (the command was given on the pull request, not its issue)."""
    info = forge.issue(repo, number)
    if info.is_pull and OFFER in info.body and info.author.lower() == (forge.bot_login() or "").lower():
        return f"The egress proxy refused them during the run that wrote [this pull request]({info.html_url})."
    return "No run on this issue offered these hosts; they were asked for by hand."
