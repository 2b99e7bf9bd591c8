"""Attempts on the App: `decode serve` with DECODE_PUBLIC_URL, decode.yml's `attempts: 3`, a labeled issue,
against the fake GitHub and the fake Messages API (one scripted session per attempt). The pull request's body
lists the three attempts, each row linking its own transcript page, and each link opens that attempt's
transcript on the server; the tracking comment's page of the run links the three."""

from __future__ import annotations

import re
import urllib.error
import urllib.request

from tests.server.test_serve import labeled
from tests.support.server import NAME, OWNER, Server, env, free_port, wait_for  # noqa: F401 (fixture)


def notes(lines: int, said: str) -> list:
    command = "; ".join(f"echo 'note {n}' >> NOTES.md" for n in range(lines))
    return [[{"type": "tool_use", "name": "bash", "input": {"command": command}}], [{"type": "text", "text": said}]]


SAID = {3: "Wrote three notes.", 1: "Wrote one note.", 2: "Wrote two notes."}


def page(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""


def test_each_attempts_row_links_its_own_transcript_page(env, fake_github, fake_anthropic, tmp_path):
    fake_github.push_branch(OWNER, NAME, "main", {".github/decode.yml": "attempts: 3\n"})
    fake_anthropic.sessions([("Write notes", notes(lines, said)) for lines, said in SAID.items()])
    port = free_port()
    server = Server({**env, "DECODE_PUBLIC_URL": f"http://127.0.0.1:{port}"}, tmp_path / "serve.log", port=port)
    try:
        number = fake_github.add_issue(OWNER, NAME, "Write notes", "Please.", user="alice")
        assert server.post("issues", labeled(fake_github, number)) == 202
        [pr] = wait_for(lambda: fake_github.pulls(OWNER, NAME), what="the pull request")
        rows = [line for line in pr["body"].splitlines() if re.match(r"\| \d", line) and "transcript" in line]
        links = [re.search(r"\[transcript\]\((http://127\.0\.0\.1:\d+/runs/job-1-(\d)\?[^)]+)\)", row) for row in rows]
        assert len(rows) == 3 and all(links), pr["body"]
        assert sorted(link.group(2) for link in links) == ["1", "2", "3"]
        shown = {}
        for row, link in zip(rows, links):
            status, html = page(link.group(1))
            assert status == 200, link.group(1)
            [said] = [text for text in SAID.values() if text in html]  # this attempt's transcript, no other's
            shown[said] = "(published)" in row
        assert shown == {"Wrote one note.": True, "Wrote two notes.": False, "Wrote three notes.": False}
        other = links[0].group(1).replace(f"job-1-{links[0].group(2)}", f"job-1-{links[1].group(2)}")
        assert page(other)[0] == 404  # a link is one attempt's: its signature opens no other page
        tracking = fake_github.comments(OWNER, NAME, number)[0]["body"]
        [run_page] = re.findall(r"\[Transcript\]\((http://[^)]+/runs/job-1\?[^)]+)\)", tracking)
        status, html = page(run_page)  # the run's own page: it has no transcript, its attempts do
        assert status == 200 and sorted(re.findall(r'href="/runs/job-1-(\d)\?exp=\d+&amp;sig=\w+"', html)) == [
            "1", "2", "3"], html
    finally:
        assert server.stop() == 0
