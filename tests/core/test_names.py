"""Each name the bot writes reads back to what made it; other names read back as None."""

import re

import pytest

from bot.core.names import (
    CLI_ORIGIN,
    actions_origin,
    attempt_dir,
    attempt_of,
    best_of_run_id,
    issue_branch,
    is_decode_branch,
    issue_of_branch,
    job_id,
    job_key,
    key_parts,
    new_store_id,
    run_branch,
    run_id,
    run_of_branch,
    run_tag,
    run_tag_parts,
)


@pytest.mark.parametrize("n", [1, 42, 10**17])
def test_run_ids_round_trip(n):
    assert run_id(n) == f"job-{n}" and job_id(run_id(n)) == n


def test_a_best_of_n_attempts_run_id_names_its_job():
    assert best_of_run_id(run_id(7), 3) == "job-7-3" and job_id(best_of_run_id(run_id(7), 3)) == 7


@pytest.mark.parametrize("name", ["job-", "job-x", "job-1.2", "JOB-1", "job-1 ", "job-" + "9" * 19, "r42", "",
                                  "job-1-0", "job-1-10", "job-1-2-3"])
def test_other_names_are_no_run_id(name):
    assert job_id(name) is None


@pytest.mark.parametrize("attempt", [1, 2, 17])
def test_attempt_directories_round_trip(attempt):
    assert attempt_of("job-3", attempt_dir("job-3", attempt)) == attempt
    assert attempt_of("job-30", attempt_dir("job-3", attempt)) is None


def test_attempt_directories_of_other_runs_or_shapes_are_none():
    assert attempt_dir("job-3", 1) == "job-3" and attempt_dir("job-3", 2) == "job-3.2"
    for name in ("job-31", "job-3.", "job-3.x", "job-3.1", "job-3-2", "job-33.2"):
        assert attempt_of("job-3", name) is None, name


@pytest.mark.parametrize("scope", [7, None, "labels"])
def test_job_keys_round_trip(scope):
    repo, number = key_parts(job_key("Octo/App", scope))
    assert repo == "octo/app" and number == (scope if isinstance(scope, int) else None)
    assert job_key("Octo/App", scope) == f"octo/app#{scope if scope is not None else 'run'}"


def test_issue_branches_follow_the_contract_and_round_trip():
    assert issue_branch(42, "Fix the flaky date test!") == "decode/issue-42-fix-the-flaky-date-test"
    assert issue_branch(7, "日本語だけ") == "decode/issue-7-task"
    long = issue_branch(1, "word " * 40)
    assert len(long) <= len("decode/issue-1-") + 40 and not long.endswith("-")
    for number, title in ((42, "Fix it!"), (7, "日本語だけ"), (1, "word " * 40)):
        assert issue_of_branch(issue_branch(number, title)) == number
    assert issue_of_branch("decode/run-4242") is None and issue_of_branch("feature/issue-1-x") is None


def test_run_branches_round_trip():
    action = run_tag(actions_origin("octo/calendar"), "4242")
    assert run_branch(action) == "decode/run-4242" and run_of_branch(run_branch(action)) == "4242"
    assert run_branch(run_tag(CLI_ORIGIN, "0123abcdef")) == "decode/run-0123abcdef"
    assert run_of_branch("decode/issue-1-x") is None and run_of_branch("main") is None


def test_two_stores_job_1_get_two_run_branches():
    one, two = new_store_id(), new_store_id()
    assert run_branch(run_tag(one, run_id(1))) == f"decode/run-{one}-job-1" != run_branch(run_tag(two, run_id(1)))
    with pytest.raises(ValueError):
        run_branch("job-1")


def test_decode_branches_are_the_ones_the_encoders_make():
    assert is_decode_branch(issue_branch(3, "x")) and is_decode_branch(run_branch(run_tag(CLI_ORIGIN, "r1")))
    assert not is_decode_branch("main") and not is_decode_branch("feature/decode/x")


def test_store_ids_are_drawn_at_random():
    ids = {new_store_id() for _ in range(100)}
    assert len(ids) == 100 and all(re.fullmatch(r"[0-9a-f]{16}", i) for i in ids)


@pytest.mark.parametrize("origin, rid", [("3f9a1c2e7b4d5a60", "job-7"), (actions_origin("Octo/Calendar"), "123456"),
                                         (CLI_ORIGIN, "0123abcdef")])
def test_run_tags_round_trip(origin, rid):
    assert run_tag_parts(run_tag(origin, rid)) == (origin, rid)


def test_the_same_run_id_of_two_origins_gets_two_tags():
    assert run_tag(new_store_id(), run_id(1)) != run_tag(new_store_id(), run_id(1))
    assert run_tag(actions_origin("octo/a"), "5") != run_tag(actions_origin("octo/b"), "5")
    assert actions_origin("Octo/Calendar") == "actions/octo/calendar"


@pytest.mark.parametrize("origin, rid", [("", "job-1"), ("a b", "job-1"), ("abc", ""), ("abc", "job-1 -->"),
                                         ("x-->", "1"), ("abc", "a:b")])
def test_a_tag_that_would_not_read_back_is_refused(origin, rid):
    with pytest.raises(ValueError):
        run_tag(origin, rid)


@pytest.mark.parametrize("tag", ["job-1", "abc:", ":job-1", "a:b:c", "abc:job-1 ", "<!-- x -->", ""])
def test_other_text_is_no_run_tag(tag):
    assert run_tag_parts(tag) is None
