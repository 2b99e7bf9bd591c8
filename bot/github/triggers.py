"""Trigger rules: a GitHub event and its payload -> the `Work` it asks for, or the reason to `Ignore` it.

Sans-I/O: nothing here talks to GitHub. The one rule that needs the API, the
sender's permission on the repository, is left to the caller, which looks it up
and asks `may_trigger`; a refused human gets `refusal_text` once.

A `Router` maps ``event.action`` keys (``event`` alone for events that carry no
action) to handlers, each given only the `Rules` it needs (the label and the
command), not the settings. `APP_ROUTES` is the App's table and reads in one
screen; the Action builds the same router with its schedule and dispatch routes
added (bot/action.py), so both take every trigger through one `decide`.
Payload shapes: https://docs.github.com/en/webhooks/webhook-events-and-payloads
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from bot.config import GitHubSettings
from bot.github.work import (
    CHECK_NAME, Allow, CheckSuite, Comment, Continue, Dispatch, Go, Issue, Labels, PlanRequest, Review, ReviewComment,
    Work, work_of_check,
)

WRITE_PERMISSIONS = frozenset({"admin", "maintain", "write"})
CONTINUE = "continue"  # `/decode continue`: carry on from a pull request's last run (bot/github/resume.py)
ON_ISSUES: dict[str, type[PlanRequest] | type[Go]] = {"plan": PlanRequest, "go": Go}  # `/decode plan`, `/decode go`: plan first, then run it (planning.py)
ALLOW = "allow"  # `/decode allow HOST ...`: a pull request adding hosts to allow_domains (bot/github/allow.py)


@dataclass(frozen=True)
class Ignore:
    """The event starts no work; `reason` says why, for logs and the 200 answer."""

    reason: str


@dataclass(frozen=True)
class Rules:
    """What the handlers decide with: the label that starts work on an issue, the comment command."""

    label: str = "agent"
    command: str = "/decode"
    app_id: str | None = None  # the App's id: "Re-run" is taken only on check runs it made

    @classmethod
    def of(cls, github: GitHubSettings) -> "Rules":
        return cls(label=github.trigger_label, command=github.command, app_id=github.app_id)


# Workflow runs: whoever started one may run workflows, and the job checks permissions again. A bot that
# labels or comments passes here: whether it may start work is `allowed_bots` in the default branch's
# decode.yml, which the job reads (bot/github/bots.py), so that a bot it does not list is ignored silently.
WORKFLOW_RUNS = ("schedule", "workflow_dispatch")
# Suite conclusions a commit can fix; `cancelled` (a person, a newer push) and `action_required` (a person
# on GitHub) are not, and `neutral`, `skipped`, `stale`, `success` are not failures.
FAILED_SUITES = frozenset({"failure", "timed_out", "startup_failure"})

Decision = Work | Ignore
Handler = Callable[[dict[str, Any], Rules], Decision]


class Router:
    """Event keys -> handlers, applied with `rules`; build one per process and share it."""

    def __init__(self, rules: Rules, routes: Mapping[str, Handler] | None = None) -> None:
        self.rules = rules
        self.routes: dict[str, Handler] = dict(APP_ROUTES if routes is None else routes)

    def with_routes(self, routes: Mapping[str, Handler]) -> "Router":
        """A router with `routes` added to (or replacing) these."""
        return Router(self.rules, {**self.routes, **routes})

    def decide(self, event: str, payload: dict[str, Any]) -> Decision:
        """Whether `event` (the ``X-GitHub-Event`` name) with `payload` starts work."""
        if not isinstance(payload, dict):
            return Ignore("the payload is not a JSON object")
        action = payload.get("action")
        key = f"{event}.{action}" if action else event
        handler = self.routes.get(key)
        if handler is None:
            keys = sorted(k for k in self.routes if k == event or k.startswith(f"{event}."))
            if not keys:
                return Ignore(f"event {event!r} is not one decode-bot acts on")
            return Ignore(f"{key} is not handled (handled: {', '.join(keys)})")
        try:
            return handler(payload, self.rules)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            return Ignore(f"malformed {key} payload: missing or bad field {exc}")


def may_trigger(permission: str) -> bool:
    """True for repository permissions that may start work (admin, maintain, write)."""
    return (permission or "").strip().lower() in WRITE_PERMISSIONS


def refusal_text(login: str, permission: str, command: str) -> str:
    """The one polite reply to a human whose permission does not allow starting work."""
    level = permission or "none"
    return (
        f"Hi @{login}, thanks for the request! `{command}` starts work only for people with "
        f"write access to this repository (admin, maintain or write), and your access here is "
        f"`{level}`, so I have not started anything. A maintainer can run `{command}` or add the "
        f"trigger label if they would like me to take this on."
    )


def command_instructions(body: str | None, command: str) -> str | None:
    """The text after `command` when `body` starts with it as a whole word, else None.

    Leading whitespace is allowed; the rest of the first line and all following
    lines are the instructions (stripped, newlines normalized).
    """
    if not body or not command:
        return None
    text = body.replace("\r\n", "\n").replace("\r", "\n").lstrip()
    match = re.match(re.escape(command) + r"(?=\s|$)", text)
    if match is None:
        return None
    return text[match.end():].strip()


# -- the table ---------------------------------------------------------------


def _issue_labeled(payload: dict[str, Any], rules: Rules) -> Decision:
    label = (payload.get("label") or {}).get("name")
    if label != rules.label:
        return Ignore(f"label {label!r} is not the trigger label {rules.label!r}")
    # Labels on pull requests arrive as pull_request.labeled, which is not a trigger.
    return Issue(number=payload["issue"]["number"], **_text(payload["issue"]), **_common(payload))


ATTEMPTS = re.compile(r"attempts=(\S*)(?:\s|$)", re.IGNORECASE)  # `/decode attempts=N ...` (bot/run/attempts.py)


def _issue_comment(payload: dict[str, Any], rules: Rules) -> Decision:
    comment = payload["comment"]
    instructions = command_instructions(comment.get("body"), rules.command)
    if instructions is None:
        return Ignore(f"the comment does not start with {rules.command}")
    issue = payload["issue"]
    is_pr = "pull_request" in issue
    word, _, rest = instructions.partition("\n")[0].partition(" ")
    more = "\n".join([rest, *instructions.split("\n")[1:]]).strip()
    if word.lower() == CONTINUE:
        return Continue(number=issue["number"], comment_id=comment["id"], instructions=more, is_pull_request=is_pr,
                        **_text(issue), **_common(payload))
    if word.lower() == ALLOW:
        return Allow(number=issue["number"], comment_id=comment["id"], hosts=tuple(more.split()), is_pull_request=is_pr,
                     **_common(payload))
    if word.lower() in ON_ISSUES:
        if is_pr:
            return Ignore(f"{rules.command} {word.lower()} works on issues, not on pull requests")
        return ON_ISSUES[word.lower()](number=issue["number"], comment_id=comment["id"], instructions=more,
                                       **_text(issue), **_common(payload))
    attempts = ATTEMPTS.match(instructions)
    return Comment(
        is_pull_request=is_pr,
        number=issue["number"],
        comment_id=comment["id"],
        instructions=instructions[attempts.end():].strip() if attempts else instructions,
        attempts=attempts.group(1) if attempts else None,
        **_text(issue),
        **_common(payload),
    )


def _review_comment(payload: dict[str, Any], rules: Rules) -> Decision:
    comment = payload["comment"]
    instructions = command_instructions(comment.get("body"), rules.command)
    if instructions is None:
        return Ignore(f"the review comment does not start with {rules.command}")
    pr = payload["pull_request"]
    line = comment.get("line")
    return ReviewComment(
        number=pr["number"],
        comment_id=comment["id"],
        instructions=instructions,
        path=comment.get("path"),
        line=line if line is not None else comment.get("original_line"),
        diff_hunk=comment.get("diff_hunk"),
        **_text(pr),
        **_common(payload),
    )


def _review(payload: dict[str, Any], rules: Rules) -> Decision:
    """A submitted review: its body starts with the command, or it requests changes. Whether a review that
    requests changes applies (a decode-bot pull request, `review_trigger` in the base branch's decode.yml) needs
    GitHub's facts: the job decides (bot/github/job.py)."""
    review = payload["review"]
    instructions = command_instructions(review.get("body"), rules.command)
    if instructions is None and str(review.get("state") or "").lower() != "changes_requested":
        return Ignore(f"the review does not start with {rules.command} and does not request changes")
    pr = payload["pull_request"]
    return Review(
        number=pr["number"],
        review_id=review["id"],
        instructions=instructions if instructions is not None else (review.get("body") or "").strip(),
        by_command=instructions is not None,
        **_text(pr),
        **_common(payload),
    )


def _edited(payload: dict[str, Any], rules: Rules) -> Decision:
    return Ignore("edited comments never re-trigger work")


def _dispatch(payload: dict[str, Any], rules: Rules) -> Decision:
    prompt = str((payload.get("inputs") or {}).get("prompt") or "").strip()
    if not prompt:
        return Ignore("workflow_dispatch without a `prompt` input")
    ref = payload.get("ref") or ""
    return Dispatch(
        instructions=prompt,
        base_ref=ref.removeprefix("refs/heads/") or None,
        **_common(payload),
    )


def _suite_completed(payload: dict[str, Any], rules: Rules) -> Decision:
    """A check suite that failed on the head of a pull request of this repository (a fork's suites list no
    pull requests): the job decides, with the facts, whether it is a decode-bot pull request with rounds left."""
    suite = payload["check_suite"]
    if rules.app_id and str((suite.get("app") or {}).get("id") or "") == str(rules.app_id):
        return Ignore("the check suite is decode-bot's own (its check runs)")
    if suite.get("conclusion") not in FAILED_SUITES:
        return Ignore(f"the check suite concluded {suite.get('conclusion')!r}, not a failure a commit can fix")
    repo_id = payload["repository"]["id"]
    pulls = [p for p in suite.get("pull_requests") or () if ((p.get("head") or {}).get("repo") or {}).get("id") == repo_id]
    if not pulls:
        return Ignore("the failed check suite is on no pull request of this repository")
    return CheckSuite(number=pulls[0]["number"], head_sha=suite["head_sha"], **_common(payload))


def _rerequested(payload: dict[str, Any], rules: Rules) -> Decision:
    """"Re-run" on a `decode-bot` check run this App made: the work its `external_id` holds, asked again by
    whoever clicked (the job checks their permission as for a command). GitHub sends `rerequested` only to
    the App that made the check run (https://docs.github.com/en/webhooks/webhook-events-and-payloads#check_run)."""
    run = payload["check_run"]
    if run.get("name") != CHECK_NAME:
        return Ignore(f"the check run {run.get('name')!r} is not decode-bot's")
    app = str((run.get("app") or {}).get("id") or "")
    if rules.app_id and app != str(rules.app_id):
        return Ignore(f"the check run was made by app {app or '(none)'}, not this one")
    sender = _sender(payload)
    work = work_of_check(str(run.get("external_id") or ""), sender["sender_login"], sender["sender_type"])
    if work is None or work.repo.lower() != payload["repository"]["full_name"].lower():
        return Ignore("the check run names no decode-bot work of this repository")
    return work


def _installed(payload: dict[str, Any], rules: Rules) -> Decision:
    """An installation created, or repositories added to one: the trigger label goes where it is missing."""
    listed = payload.get("repositories_added") if "repositories_added" in payload else payload.get("repositories")
    repos = tuple(r["full_name"] for r in listed or () if isinstance(r, dict) and r.get("full_name"))
    if not repos:
        return Ignore("the installation names no repositories")
    return Labels(repos=repos, **_sender(payload))


APP_ROUTES: dict[str, Handler] = {
    "issues.labeled": _issue_labeled,
    "issue_comment.created": _issue_comment,
    "pull_request_review_comment.created": _review_comment,
    "pull_request_review.submitted": _review,
    "issue_comment.edited": _edited,
    "pull_request_review_comment.edited": _edited,
    "workflow_dispatch": _dispatch,
    "check_suite.completed": _suite_completed,
    "check_run.rerequested": _rerequested,
    "installation.created": _installed,
    "installation_repositories.added": _installed,
}


# -- helpers -----------------------------------------------------------------


def _text(item: dict[str, Any]) -> dict[str, Any]:
    """The title and body of an issue or pull request object in a payload (a null body is empty)."""
    if not isinstance(item.get("title"), str):
        return {}
    body = item.get("body")
    return {"title": item["title"], "body": body if isinstance(body, str) else ""}


def _sender(payload: dict[str, Any]) -> dict[str, Any]:
    sender = payload.get("sender") or {}
    if not sender.get("login"):
        raise KeyError("sender.login")
    return {"sender_login": sender["login"], "sender_type": sender.get("type") or "User"}


def _common(payload: dict[str, Any]) -> dict[str, Any]:
    return {"repo": payload["repository"]["full_name"], **_sender(payload)}