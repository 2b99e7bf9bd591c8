"""The queue's and the check run's encoding of the commands on a comment (bot/github/work.py): a job stored, or a
check run made, by an earlier version reads back as the same work, and the same work is written the same way
(the check run's `external_id` is matched as a string, so even the order of its keys is part of it)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from bot.github.work import Continue, Go, PlanRequest, Work, check_ref, job_payload, work_of, work_of_check

# work -> its stored `work` (as the version before the shared shape wrote it) and its check run's external_id
STORED = [
    (Continue(repo="o/r", number=3, sender_login="alice", sender_type="User", comment_id=7, instructions="fix the rest",
              title="T", body="B"),
     '{"kind":"continue","repo":"o/r","number":3,"sender_login":"alice","sender_type":"User","comment_id":7,'
     '"instructions":"fix the rest","is_pull_request":true,"title":"T","body":"B"}',
     '{"tag":"origin:job-3","work":{"kind":"continue","repo":"o/r","number":3,"comment_id":7,'
     '"instructions":"fix the rest","is_pull_request":true}}'),
    (PlanRequest(repo="o/r", number=4, sender_login="alice", sender_type="User", comment_id=8, instructions="small"),
     '{"kind":"plan","repo":"o/r","number":4,"sender_login":"alice","sender_type":"User","comment_id":8,'
     '"instructions":"small","title":null,"body":null}',
     '{"tag":"origin:job-3","work":{"kind":"plan","repo":"o/r","number":4,"comment_id":8,"instructions":"small"}}'),
    (Go(repo="o/r", number=4, sender_login="alice", sender_type="User", comment_id=9, title="T"),
     '{"kind":"go","repo":"o/r","number":4,"sender_login":"alice","sender_type":"User","comment_id":9,'
     '"instructions":"","title":"T","body":null}',
     '{"tag":"origin:job-3","work":{"kind":"go","repo":"o/r","number":4,"comment_id":9,"instructions":""}}'),
]


@pytest.mark.parametrize("work,stored,external_id", STORED)
def test_a_command_is_stored_and_read_back_as_an_earlier_version_wrote_it(work: Work, stored: str,
                                                                          external_id: str) -> None:
    payload = {"work": json.loads(stored), "event": "issue_comment", "delivery": "d-1", "installation": None}
    assert work_of(payload) == work
    assert json.dumps(job_payload(work, "issue_comment", "d-1")["work"], separators=(",", ":")) == stored
    assert check_ref(work, "origin:job-3") == external_id
    # "Re-run" on the check run: the same work, asked again by its sender; GitHub's current title and body are read
    assert work_of_check(external_id, "alice", "User") == dataclasses.replace(work, title=None, body=None)
