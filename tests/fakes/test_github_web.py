"""The fake GitHub's pages of an issue and a pull request: at the html_url (and diff_url) the REST API reports,
as a browser fetches them."""

from __future__ import annotations

import requests

from tests.fakes.github import FakeGitHub


def test_the_pages_of_an_issue_and_a_pull_request_show_what_github_would(fake_github: FakeGitHub) -> None:
    fake_github.add_repo("octo", "web", {"a.txt": "one\n"})
    issue = fake_github.add_issue("octo", "web", "A <bug>", "It breaks: see https://example.com/x.", user="octocat")
    fake_github.add_comment("octo", "web", issue, "## On it\n\n| a | b |\n| - | - |\n| `x` | <b>y</b> |\n"
                            "<!-- decode-bot:run:1 -->[the run](https://example.com/run/1)", user="octocat")
    fake_github.push_branch("octo", "web", "fix", {"a.txt": "two\n"})
    pull = fake_github.add_pull("octo", "web", "Fix it", f"Fixes #{issue}", head_branch="fix", base_branch="main")
    page = requests.get(fake_github.issue("octo", "web", issue)["html_url"], timeout=10)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "A &lt;bug&gt;" in page.text and "<h2>On it</h2>" in page.text  # Markdown, as GitHub renders it
    assert "<td><code>x</code></td>" in page.text and "&lt;b&gt;y&lt;/b&gt;" in page.text  # tables; HTML as text
    assert "decode-bot:run" not in page.text and '<a href="https://example.com/run/1">the run</a>' in page.text
    assert '<a href="https://example.com/x">https://example.com/x</a>.' in page.text
    rendered = fake_github.pull("octo", "web", pull)
    page = requests.get(rendered["html_url"], timeout=10)
    assert page.status_code == 200 and f"Fixes #{issue}" in page.text and "-one" in page.text and "+two" in page.text
    diff = requests.get(rendered["diff_url"], timeout=10)
    assert diff.status_code == 200 and diff.text.startswith("diff --git a/a.txt b/a.txt") and "+two\n" in diff.text
    base = fake_github.web_url + "/octo/web"
    for missing in (f"/issues/{pull}", f"/pull/{issue}", "/issues/99", "/../nope/issues/1"):
        assert requests.get(base + missing, timeout=10).status_code == 404, missing
