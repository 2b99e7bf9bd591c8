from bot.agent.loop import AgentResult
from bot.run.pipeline import Job, commit_message, issue_branch


def test_issue_branches_follow_the_contract():
    assert issue_branch(42, "Fix the flaky date test!") == "decode/issue-42-fix-the-flaky-date-test"
    assert issue_branch(7, "日本語だけ") == "decode/issue-7-task"
    long = issue_branch(1, "word " * 40)
    assert len(long) <= len("decode/issue-1-") + 40 and not long.endswith("-")


def test_commit_messages_mark_incomplete_work():
    job = Job(repo=".", task="Make the retry count configurable\nmore detail", branch="b", run_id="r")
    done = commit_message(job, AgentResult("completed", "Added RETRIES."))
    assert done.startswith("decode: Make the retry count configurable\n\nAdded RETRIES.")
    capped = commit_message(job, AgentResult("max_cost", "**Incomplete**"))
    assert capped.startswith("decode (incomplete: max_cost): Make the retry")
