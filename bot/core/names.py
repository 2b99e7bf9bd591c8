"""The names the bot writes and later reads back, each encoder beside its decoder.

- run ids: `job-<N>` for the job store's job N (a run's directory, its record, page links); N restarts at 1
  in a new store, so a run id is unique only within its store; `<run id>-<k>` for attempt k of a best-of-N run
  (decode.yml's `attempts`), each its own run with its own directory and page;
- store ids: 16 hex digits drawn at random once, when a job store is made (the store's migration);
- run tags: `<origin>:<run_id>`, unique wherever GitHub shows them (the hidden markers of the comments a run
  looks up again): the origin is the store id for a store's job, `actions/<owner/name>` for an Actions run
  (GITHUB_RUN_ID is unique within its repository) and `cli` for the CLI's random run id;
- attempt directories: `<run_id>` for the first attempt, `<run_id>.<k>` for a retried job's attempt k;
- job keys: `<owner/name>#<N>` (the repository lower-cased), `#run` for work on no issue, `#labels` for the
  repository's label set-up;
- branches: `decode/issue-<N>-<slug>` for an issue, `decode/run-<id>` otherwise (the contract's names; the id
  comes from the run tag, so two stores' job N push to two branches).

A decoder answers None for a name that is not of its form, never raises.
"""

from __future__ import annotations

import re
import secrets

RUN_PREFIX = "job-"
CLI_ORIGIN = "cli"
ACTIONS_ORIGIN = "actions/"
BRANCH_PREFIX = "decode/"
_RUN_ID = re.compile(r"job-([0-9]{1,18})(?:-[1-9])?")
_RUN_TAG = re.compile(r"([A-Za-z0-9._/-]+):([A-Za-z0-9._-]+)")
_ATTEMPT = re.compile(r"(.+)\.([0-9]{1,9})")
_ISSUE_BRANCH = re.compile(r"decode/issue-([0-9]+)-[a-z0-9-]*")
_RUN_BRANCH = re.compile(r"decode/run-(.+)")


def run_id(job_id: int) -> str:
    """The run id of the store's job `job_id`: stable across attempts, so a retry finds its comments and branch."""
    return f"{RUN_PREFIX}{job_id}"


def job_id(run_id: str) -> int | None:
    """The job number in a run id `job-<N>` or `job-<N>-<k>` (`best_of_run_id`), None for any other name."""
    match = _RUN_ID.fullmatch(run_id)
    return int(match.group(1)) if match else None


def best_of_run_id(run_id: str, number: int) -> str:
    """The run id of attempt `number` (1-9) of the best-of-N run `run_id`."""
    return f"{run_id}-{number}"


def new_store_id() -> str:
    """A store id: drawn once per store, so that no two stores (a new data dir, a move to PostgreSQL, a second
    deployment) tag their job N alike."""
    return secrets.token_hex(8)


def actions_origin(repo: str) -> str:
    """The origin of an Actions run of repository `repo`: its GITHUB_RUN_ID is unique within the repository."""
    return f"{ACTIONS_ORIGIN}{repo.lower()}"


def run_tag(origin: str, run_id: str) -> str:
    """The tag of run `run_id` of `origin` (a store id, `actions_origin`, `CLI_ORIGIN`): what the hidden markers
    of its comments carry, so a retry of the run finds them and no other run does. A ValueError for an origin
    or run id that would not read back (`run_tag_parts`)."""
    tag = f"{origin}:{run_id}"
    if _RUN_TAG.fullmatch(tag) is None:
        raise ValueError(f"not a run tag: {tag!r}")
    return tag


def run_tag_parts(tag: str) -> tuple[str, str] | None:
    """The origin and run id of a run tag, None for anything else."""
    match = _RUN_TAG.fullmatch(tag)
    return (match.group(1), match.group(2)) if match else None


def attempt_dir(run_id: str, attempt: int) -> str:
    """The directory name of a run's attempt: the run id itself for the first, `<run_id>.<k>` after."""
    return run_id if attempt == 1 else f"{run_id}.{attempt}"


def attempt_of(run_id: str, name: str) -> int | None:
    """Which attempt of `run_id` the directory `name` holds, None when it holds none of them."""
    if name == run_id:
        return 1
    match = _ATTEMPT.fullmatch(name)
    return int(match.group(2)) if match and match.group(1) == run_id and int(match.group(2)) > 1 else None


def job_key(repo: str, scope: int | str | None) -> str:
    """The key of a repository's jobs that never run at the same time: `owner/name#N` for issue or pull
    request N, `#<scope>` for a named one (`labels`), `#run` for work on no issue."""
    return f"{repo.lower()}#{scope if scope is not None else 'run'}"


def key_parts(key: str) -> tuple[str, int | None]:
    """The repository and number of a job key (None for `#run`, `#labels` or anything else after the `#`)."""
    repo, _, rest = key.partition("#")
    return repo, int(rest) if rest.isdigit() else None


def issue_branch(number: int, title: str) -> str:
    """`decode/issue-<N>-<slug>`, the contract's branch for an issue."""
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:40].rstrip("-") or "task"
    return f"{BRANCH_PREFIX}issue-{number}-{slug}"


def issue_of_branch(branch: str) -> int | None:
    """The issue number of a `decode/issue-<N>-<slug>` branch, None for any other branch."""
    match = _ISSUE_BRANCH.fullmatch(branch)
    return int(match.group(1)) if match else None


def is_decode_branch(branch: str) -> bool:
    """Whether `branch` is one decode-bot names (`issue_branch`, `run_branch`): the gates of reviews and
    failed checks run only on pull requests from such a branch."""
    return branch.startswith(BRANCH_PREFIX)


def run_branch(tag: str) -> str:
    """`decode/run-<id>`, the contract's branch for work on no issue, of the run tagged `tag`: the id is the run
    id where it is unique within the repository (an Actions run's GITHUB_RUN_ID, the CLI's random id) and
    `<store id>-job-<N>` for a store's job, whose number a new store hands out again. A ValueError for a tag
    that is none."""
    parts = run_tag_parts(tag)
    if parts is None:
        raise ValueError(f"not a run tag: {tag!r}")
    origin, rid = parts
    unique = origin == CLI_ORIGIN or origin.startswith(ACTIONS_ORIGIN)
    return f"{BRANCH_PREFIX}run-{rid if unique else f'{origin}-{rid}'}"


def run_of_branch(branch: str) -> str | None:
    """The id of a `decode/run-<id>` branch (`run_branch`), None for any other branch."""
    match = _RUN_BRANCH.fullmatch(branch)
    return match.group(1) if match else None
