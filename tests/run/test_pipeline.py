from bot.agent.loop import AgentResult
from bot.run.pipeline import Job, commit_message


def test_commit_messages_mark_incomplete_work():
    job = Job(repo=".", task="Make the retry count configurable\nmore detail", branch="b", run_id="r")
    done = commit_message(job, AgentResult("completed", "Added RETRIES."))
    assert done.startswith("decode: Make the retry count configurable\n\nAdded RETRIES.")
    capped = commit_message(job, AgentResult("max_cost", "**Incomplete**"))
    assert capped.startswith("decode (incomplete: max_cost): Make the retry")
