"""A bot that `allowed_bots` lists cannot start runs in a loop (issue 32): through a running `decode serve`,
signed deliveries of GitHub's issue_comment example sent as `github-actions[bot]`, against the fake GitHub
and the fake Messages API. Its commands on decode-bot's own pull requests are ignored, and past
DECODE_MAX_BOT_RUNS runs on one issue one reply says so and nothing more runs there."""

from __future__ import annotations

import urllib.request

from bot.github.bots import BOT_RUN
from tests.fakes.webhook_examples import example
from tests.support.server import NAME, OWNER, Server, env, wait_for  # noqa: F401 (fixture)

BOT = "github-actions[bot]"
NOTES = [[{"type": "tool_use", "name": "bash", "input": {"command": "echo noted >> NOTES.md"}}],
         [{"type": "text", "text": "Wrote the notes."}]]


def commented(fake, number: int, *, pull: bool = False) -> dict:
    """The bot's `/decode` comment on issue or pull request `number`, as GitHub delivers it."""
    comment_id = fake.add_comment(OWNER, NAME, number, "/decode write the notes", user=BOT)
    issue = fake.issue(OWNER, NAME, number)
    return example("issue_comment", "created", repo=f"{OWNER}/{NAME}", sender=BOT, sender_type="Bot",
                   issue__number=number, issue__title=issue["title"], issue__body=issue["body"],
                   comment__id=comment_id, comment__body="/decode write the notes",
                   **({"issue__pull_request": {"url": "x"}} if pull else {}))


def jobs_done(server: Server, count: int) -> None:
    wait_for(lambda: f'decode_jobs{{state="done"}} {count}.0' in urllib.request.urlopen(server.url + "/metrics")
             .read().decode(), timeout=120, what=f"{count} jobs done")


def test_an_allowed_bot_starts_at_most_the_cap_of_runs_on_an_issue_and_hears_it_once(
        env, fake_github, fake_anthropic, tmp_path):
    fake_anthropic.script(NOTES, by_position=True)
    fake_github.push_branch(OWNER, NAME, "main", {".github/decode.yml": f"allowed_bots:\n  - {BOT}\n"})
    number = fake_github.add_issue(OWNER, NAME, "Notes", "Please.", user="alice")
    server = Server({**env, "DECODE_MAX_BOT_RUNS": "2"}, tmp_path / "serve.log")
    try:
        for sent in range(1, 5):  # one at a time: each run's tracking comment is what the next one counts
            assert server.post("issue_comment", commented(fake_github, number)) == 202
            jobs_done(server, sent)
    finally:
        assert server.stop() == 0
    ours = [c for c in fake_github.comments(OWNER, NAME, number) if c["user"]["login"] != BOT]
    assert len([c for c in ours if BOT_RUN in c["body"]]) == 2  # two runs, each with its tracking comment
    [capped] = [c for c in ours if "DECODE_MAX_BOT_RUNS" in c["body"]]  # said once, for the third and fourth
    assert "Bots have started 2 runs here" in capped["body"] and "/decode" in capped["body"]
    assert len(fake_anthropic.requests) == 2 * len(NOTES)  # two runs of the session, no more


def test_an_allowed_bot_s_command_on_decode_bots_own_pull_request_is_ignored(
        env, fake_github, fake_anthropic, tmp_path):
    fake_anthropic.script(NOTES, by_position=True)
    fake_github.push_branch(OWNER, NAME, "main", {".github/decode.yml": f"allowed_bots:\n  - {BOT}\n"})
    fake_github.push_branch(OWNER, NAME, "decode/issue-1-notes", {"NOTES.md": "wip\n"})
    number = fake_github.add_pull(OWNER, NAME, "Notes", "Fixes #1", head_branch="decode/issue-1-notes",
                                  base_branch="main", user="alice")
    server = Server(env, tmp_path / "serve.log")
    try:
        assert server.post("issue_comment", commented(fake_github, number, pull=True)) == 202
        jobs_done(server, 1)
    finally:
        assert server.stop() == 0
    assert [c["user"]["login"] for c in fake_github.comments(OWNER, NAME, number)] == [BOT]
    assert fake_anthropic.requests == [] and fake_github.reactions(OWNER, NAME, issue=number) == []
