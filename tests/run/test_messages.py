"""The commit message a run writes: its subject says when the work is incomplete."""

from bot.agent.loop import AgentResult
from bot.run.messages import commit_message


def test_commit_messages_mark_incomplete_work():
    heading = "Make the retry count configurable\nmore detail"
    done = commit_message(heading, AgentResult("completed", "Added RETRIES."))
    assert done.startswith("decode: Make the retry count configurable\n\nAdded RETRIES.")
    capped = commit_message(heading, AgentResult("max_cost", "**Incomplete**"))
    assert capped.startswith("decode (incomplete: max_cost): Make the retry")
