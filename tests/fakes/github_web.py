"""The fake GitHub's web pages: a minimal HTML view of an issue (title, body, comments) and of a pull request
(title, body, diff, comments) at the `html_url` the REST API reports, and the diff as text at its `diff_url`,
so the links a demo prints or a comment holds open in a browser instead of a 404. Bodies and comments are
rendered as GitHub renders Markdown, in what a reader notices: headings, lists, code, tables, links, bare URLs
made links, HTML comments hidden, any other HTML shown as text; not GitHub's real layout."""

from __future__ import annotations

import html
import re
import subprocess
from typing import TYPE_CHECKING

from markdown_it import MarkdownIt

from tests.fakes.github_state import git

if TYPE_CHECKING:
    from tests.fakes.github import FakeGitHub, Request

PAGE = re.compile(r"^/(?P<owner>[^/]+)/(?P<name>[^/]+)/(?P<kind>issues|pull)/(?P<number>\d+)(?P<diff>\.diff)?$")
LINK = re.compile(r"(?<![(<\"'])https?://[^\s<>()\"'`]*[^\s<>()\"'`.,;:!?]")  # a bare URL; its full stop is not its
COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)  # GitHub shows no HTML comment
MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
STYLE = """body { font: 15px/1.5 system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; }
pre { white-space: pre-wrap; background: #f6f8fa; padding: .8rem; border-radius: 6px; }
code { background: #f6f8fa; padding: .1rem .3rem; border-radius: 4px; } pre code { padding: 0; }
table { border-collapse: collapse; } th, td { border: 1px solid #d0d7de; padding: .2rem .6rem; }
.add { color: #116329; } .del { color: #a40e26; } .hunk { color: #6e7781; } .state { color: #6e7781; }
section { border: 1px solid #d0d7de; border-radius: 6px; margin: 1rem 0; padding: 0 .8rem; }"""


def page(fake: FakeGitHub, request: Request) -> tuple[int, dict, bytes] | None:
    """The answer to GET of an issue's or a pull request's page (or `.diff`); None for any other request."""
    match = PAGE.match(request.path)
    if match is None or request.kind != "other" or request.method not in ("GET", "HEAD"):
        return None
    owner, name, number = match["owner"], match["name"], int(match["number"])
    with fake.lock:
        repo = fake.repos.get(f"{owner}/{name}".lower())
        if repo is None or number not in repo.issues or (match["kind"] == "pull") != (number in repo.pulls):
            return 404, {"content-type": "text/plain; charset=utf-8"}, b"Not Found\n"
        issue = fake.pull(owner, name, number) if number in repo.pulls else fake.issue(owner, name, number)
        comments = fake.comments(owner, name, number)
    diff = pull_diff(fake, issue) if number in repo.pulls else None
    if match["diff"]:
        return 200, {"content-type": "text/plain; charset=utf-8"}, (diff or "").encode()
    return 200, {"content-type": "text/html; charset=utf-8"}, render(issue, diff, comments).encode()


def pull_diff(fake: FakeGitHub, pull: dict) -> str:
    """The pull request's diff: its head against where it left its base (`git diff base...head`)."""
    head = pull["head"]["repo"]
    try:
        return git(fake.repo(head["owner"]["login"], head["name"]).path, "diff", "--no-color",
                   f"{pull['base']['sha']}...{pull['head']['sha']}") + "\n"
    except subprocess.CalledProcessError as e:
        return f"(no diff: {e.stderr.strip()})\n"


def markdown(body: str | None) -> str:
    """`body` as GitHub shows it: its HTML comments hidden, its bare URLs made links, then Markdown."""
    return MARKDOWN.render(LINK.sub(lambda m: f"<{m.group(0)}>", COMMENT.sub("", body or "")))


def render(issue: dict, diff: str | None, comments: list[dict]) -> str:
    """The page of an issue or, with `diff`, of a pull request."""
    kind = "Pull request" if diff is not None else "Issue"
    parts = [f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{html.escape(issue['title'])} "
             f"#{issue['number']}</title><style>{STYLE}</style></head><body>",
             f"<h1 id=title>{html.escape(issue['title'])} <span class=state>#{issue['number']}</span></h1>",
             f"<p class=state>{kind} by {html.escape(issue['user']['login'])}, {issue['state']}</p>",
             f"<section id=body>{markdown(issue['body'])}</section>"]
    if diff is not None:
        lines = []
        for line in html.escape(diff).splitlines():
            css = "add" if line.startswith("+") else "del" if line.startswith("-") else \
                "hunk" if line.startswith("@@") else ""
            lines.append(f'<span class="{css}">{line}</span>' if css else line)
        parts.append("<h2>Files changed</h2><pre id=diff>" + "\n".join(lines) + "</pre>")
    for c in comments:
        parts.append(f'<section class=comment id="issuecomment-{c["id"]}"><p class=state>'
                     f'{html.escape(c["user"]["login"])} commented</p>{markdown(c["body"])}</section>')
    return "\n".join(parts) + "\n</body></html>\n"
