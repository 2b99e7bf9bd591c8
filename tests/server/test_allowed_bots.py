"""`allowed_bots` through a running `decode serve` (the App): GitHub's issues.labeled example sent by bots to
/webhook, against the fake GitHub and the fake Messages API. A bot's delivery is queued like anyone's; the job
reads the default branch's decode.yml and runs it, or drops it without a word."""

from __future__ import annotations

import urllib.request

from tests.fakes.webhook_examples import example
from tests.support.server import NAME, OWNER, Server, env, wait_for  # noqa: F401 (fixture)

NOTES = [[{"type": "tool_use", "name": "bash", "input": {"command": "echo noted >> NOTES.md"}}],
         [{"type": "text", "text": "Wrote the notes."}]]


def labeled_by(fake, sender: str) -> tuple[int, dict]:
    number = fake.add_issue(OWNER, NAME, f"Notes for {sender}", "Please.", user="alice")
    issue = fake.issue(OWNER, NAME, number)
    return number, example("issues", "labeled", repo=f"{OWNER}/{NAME}", sender=sender, sender_type="Bot",
                           issue__number=number, issue__title=issue["title"], issue__body=issue["body"],
                           label__name="agent")


def test_an_allowed_bot_s_label_opens_a_pull_request_and_other_bots_and_the_app_itself_get_nothing(
        env, fake_github, fake_anthropic, tmp_path):
    fake_anthropic.script(NOTES, by_position=True)
    me = fake_github.bot_login
    fake_github.push_branch(OWNER, NAME, "main", {".github/decode.yml": f"allowed_bots:\n  - my-triage[bot]\n  - {me}\n"})
    server = Server(env, tmp_path / "serve.log")
    try:
        ignored = [labeled_by(fake_github, bot) for bot in ("renovate[bot]", me)]
        for _, payload in ignored:
            assert server.post("issues", payload) == 202
        number, payload = labeled_by(fake_github, "my-triage[bot]")
        assert server.post("issues", payload) == 202
        [pr] = wait_for(lambda: fake_github.pulls(OWNER, NAME), what="the pull request")
        assert f"Fixes #{number}" in pr["body"]
        wait_for(lambda: 'decode_jobs{state="done"} 3.0' in urllib.request.urlopen(server.url + "/metrics").read()
                 .decode(), timeout=30, what="all three jobs done")
    finally:
        assert server.stop() == 0
    [tracking] = fake_github.comments(OWNER, NAME, number)
    assert "Started by `my-triage[bot]`" in tracking["body"] and "Opened" in tracking["body"]
    for other, _ in ignored:
        assert fake_github.comments(OWNER, NAME, other) == [] and fake_github.reactions(OWNER, NAME, issue=other) == []
    assert len(fake_github.pulls(OWNER, NAME)) == 1 and len(fake_anthropic.requests) == 2
