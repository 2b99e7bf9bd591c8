"""Publishing a run as its plan says: a pull request of our own, commits on a pull request's branch, or a
fork's branch (else a patch in a reply); and the report for the tracking comment.

Pushes happen from the host's clean clone, never from the sandbox. What GitHub shows is the `Report`
(bot/github/body.py): the summary, the files changed, the notes, the figures and a copy of the
transcript whose tool outputs are capped at `OUTPUT_CAP` characters.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from bot.agent.loop import STOP_MESSAGES
from bot.core.errors import DecodeError, RateLimited
from bot.core.text import one_line
from bot.github.hosts import allow_offer
from bot.github.api_commit import read_commit, unsigned_note
from bot.github.body import BODY_LIMIT, Report, verification_section
from bot.github.conclusion import Conclusion, marker
from bot.github.forge import Forge
from bot.github.info import PullInfo
from bot.github.notes import agent_summary, files_changed, harness_notes, patch_parts
from bot.github.plan import OpenPull, Plan, PushToPull, Resume, Threads, ToFork
from bot.github.resume import TASK_CHARS, PullState, earlier_runs, last_steps, note_of, record_run, with_state
from bot.run.markdown import clip
from bot.run.pipeline import Ran
from bot.run.transcript import load_events, render_figures, render_markdown
from bot.workspace.clone import Workspace

OUTPUT_CAP = 2000  # characters of each tool input or output in the pull request's copy of the transcript


def publish(the_plan: Plan, ran: Ran, forge: Forge, repo: str, tag: str,
             redact: Callable[[str], str], *, transcript_url: str | None = None,
             command: str = "/decode", attempts: str = "") -> Conclusion:
    """Deliver the outcome as the plan says, and the report for the tracking comment; `tag` is the run's tag
    (`core.names.run_tag`) for the markers of its comments, `transcript_url` the run's transcript page, when
    the server has a public URL, `command` the comment command (`/decode allow` is offered for refused hosts),
    `attempts` the list of a run's attempts (bot/github/attempts.py), with the notes. A review's threads get
    one reply each."""
    conclusion = _deliver(the_plan, ran, forge, repo, tag, redact, transcript_url=transcript_url, command=command,
                          attempts=attempts)
    if isinstance(the_plan.delivery, PushToPull) and the_plan.delivery.stateful:
        note = note_of(tag, ran.agent.stop_reason, agent_summary(ran, redact), ran.result.figures)
        record_run(forge, repo, the_plan.delivery.number, note, the_plan.task, last_steps(load_events(
            ran.transcript_jsonl)))
    if the_plan.threads is not None:
        summary = agent_summary(ran, redact)
        answer_threads(forge, repo, the_plan.threads, _thread_reply(conclusion, summary))
    return conclusion


def answer_threads(forge: Forge, repo: str, threads: Threads, text: str) -> None:
    """Reply `text` in each thread of a review, once even if the job is retried."""
    for first in threads.first_comments:
        tag = marker("review-reply", f"{threads.review_id}-{first}")
        if forge.find_review_comment(repo, threads.number, tag) is None:
            forge.reply_to_review_comment(repo, threads.number, first, f"{text}\n\n{tag}", tag)


def _thread_reply(conclusion: Conclusion, summary: str) -> str:
    """What a review thread hears: the commit that addressed it, or why there is none."""
    commit, branch = conclusion.result.commit, conclusion.result.branch
    if commit and branch:
        lead = {"success": "✅ Addressed", "incomplete": "⚠️ Partly addressed (the run stopped early)"}.get(
            conclusion.state, "❌ The run failed; its work so far is")
        return f"{lead} in {commit}, pushed to `{branch}` with the rest of this review."
    if commit:  # a fork's branch that refused the push: the patch is in the pull request's conversation
        return "📎 decode-bot could not push to the fork's branch; the change for this review is in the patch on " \
               "this pull request."
    head = conclusion.message.split("\n\n", 1)[0]
    why = summary if len(summary) <= 1500 else clip(summary, 1500) + "\n\n…"
    return f"{head.rstrip('.')}. Nothing was pushed for this review.\n\n{why}".rstrip()


def _deliver(the_plan: Plan, ran: Ran, forge: Forge, repo: str, tag: str,
             redact: Callable[[str], str], *, transcript_url: str | None = None, command: str,
             attempts: str = "") -> Conclusion:
    """The delivery itself: a pull request, commits on one, or a fork's branch or patch; the state is the
    run's (`ran.result.state`), never decided here."""
    result, branch, delivery = ran.agent, the_plan.branch, the_plan.delivery
    commit, ws = ran.result.commit, ran.workspace
    assert ran.result.figures is not None, "a finished run's result carries its figures"
    figs = render_figures(ran.result.figures, result.stop_reason)
    summary = agent_summary(ran, redact)  # whole, before any cap
    notes = harness_notes(left_out=dict(ran.result.left_out), blocked=dict(ran.result.blocked),
                          restarts=ran.result.restarts)
    offer = allow_offer(ran.result.blocked, command)
    if isinstance(delivery, OpenPull) and delivery.plan_url:  # `/decode go`
        offer = "\n\n".join(filter(None, [f"📋 This run carried out [the plan]({delivery.plan_url}) as it read "
                                           "when `go` was given.", offer]))
    notes = "\n\n".join(filter(None, [redact(attempts), ran.review.line if ran.review else "", notes, offer]))
    changes = b"" if commit is None or ws is None else ws.git(
        "diff", "--numstat", "-z", "--no-renames", ws.base_sha, commit, what="listing changes")
    if commit is not None and ws is not None and not isinstance(delivery, ToFork):
        commit, unsigned = _push(forge, repo, ws, commit, force=isinstance(delivery, OpenPull), redact=redact)
        ran = replace(ran, result=replace(ran.result, commit=commit))
        notes = "\n\n".join(filter(None, [notes, unsigned]))
    events = load_events(ran.transcript_jsonl)
    report = Report(summary=summary, figures=figs, notes=notes, changes=files_changed(changes),
                    transcript=render_markdown(events, max_block_chars=OUTPUT_CAP, brief=True),
                    transcript_url=transcript_url, verification=verification_section(ran.verification))
    figs = f"{report.verification}\n\n{figs}"  # the tracking comment shows the verification too
    failure = f"❌ decode-bot failed: {one_line(redact(result.error or result.stop_reason))}"
    this_run = note_of(tag, result.stop_reason, summary, ran.result.figures)
    if isinstance(delivery, Resume):
        pull_state = PullState((*delivery.state.runs, this_run), delivery.state.task, last_steps(events),
                               delivery.state.closes)
        return _resume(forge, repo, delivery, ran, report, pull_state, f"{figs}\n\n{notes}".rstrip(), failure)
    on_fork = isinstance(delivery, ToFork)
    if commit is None or ws is None:
        head = failure if result.failed else "🤷 decode-bot made no changes."
        return Conclusion.of_run(ran, f"{head}\n\n{summary}\n\n{figs}\n\n{notes}".rstrip(),
                                 branch=None if on_fork else branch)
    if isinstance(delivery, ToFork):
        return _to_fork(forge, repo, delivery.pull, ran, tag, report=report, failure=failure if result.failed else None)
    if isinstance(delivery, PushToPull):  # new commits on the PR's own branch; the reply carries the rest
        body, rest = report.texts(limit=BODY_LIMIT - 1000)
        _post_parts(forge, repo, delivery.number, rest, tag)
        head = f"✅ Pushed {commit[:12]} to `{branch}`." if result.completed else \
            f"{failure}. The work so far ({commit[:12]}) is pushed to `{branch}`." if result.failed else \
            f"⚠️ Pushed partial work ({commit[:12]}) to `{branch}`: {result.stop_reason}."
        return Conclusion.of_run(ran, f"{head}\n\n{body}", branch=branch)
    assert isinstance(delivery, OpenPull), "a plan comment or an allow pull request is published by the job (job.py)"
    title = the_plan.title.splitlines()[0] if the_plan.title.strip() else "decode run"
    recorded = PullState((this_run,), the_plan.task[:TASK_CHARS], last_steps(events), delivery.closes)
    body, rest = report.texts(closes=delivery.closes, limit=BODY_LIMIT - len(recorded.block()) - 10)
    pr = forge.open_or_update_pull(repo, head=branch, base=delivery.base, title=title[:250],
                                   body=with_state(body, recorded),
                                   draft=not result.completed or ran.verification.verified == "failed")
    _post_parts(forge, repo, pr.number, rest, tag)
    verb = "Opened" if pr.created else "Updated"
    note = "" if result.completed else f" as a draft: the run {STOP_MESSAGES.get(result.stop_reason, result.stop_reason)}" \
        " (comment `/decode continue` on it to carry the work on)"
    if result.completed and ran.verification.verified == "failed":
        note = " as a draft: its `verify:` commands from .github/decode.yml still fail"
    head = f"{failure}. The work so far is in the draft {pr.html_url}." if result.failed else \
        f"{'✅' if result.completed and not note else '⚠️'} {verb} {pr.html_url}{note}."
    message = f"{head}\n\n{figs}\n\n{notes}".rstrip()
    return Conclusion.of_run(ran, message, pr_url=pr.html_url, branch=branch)


def _push(forge: Forge, repo: str, ws: Workspace, commit: str, *, force: bool,
          redact: Callable[[str], str]) -> tuple[str, str | None]:
    """Put the run's commit on its branch on GitHub, moving the branch only forward unless `force`: made
    through GitHub's API so that GitHub signs it, else pushed with git. (The commit GitHub has, the note
    saying why it is unsigned or None.) GitHub's rate limit is waited out, never pushed around: a commit
    that should be signed is not pushed unsigned for want of patience (`RateLimited` fails the attempt)."""
    made = read_commit(ws, commit)
    if not isinstance(made, str):
        try:
            return forge.make_commit(repo, made, branch=ws.branch, force=force), None
        except RateLimited:
            raise
        except DecodeError as e:
            made = f"GitHub's API did not take it ({one_line(redact(str(e)))[:300]})"
    ws.push(forge.token_for(repo), force=force)
    return commit, unsigned_note(made)


def _resume(forge: Forge, repo: str, delivery: Resume, ran: Ran, report: Report, state: PullState, figs: str,
            failure: str) -> Conclusion:
    """A continuing run: its commit (if it made one) pushed to the pull request's branch, and the description
    rebuilt over every run on the branch, ending with the new `state`, so a later `/decode continue` reads it."""
    result, commit, pull = ran.agent, ran.result.commit, delivery.pull  # the commit is pushed already (`_push`)
    summary = f"**Run {len(state.runs)} of {len(state.runs)}** on this branch, continuing run " \
              f"{len(state.runs) - 1}:\n\n{report.summary}"
    report = replace(report, summary=summary, notes="\n\n".join(filter(None, [report.notes,
                                                                               earlier_runs(delivery.state)])))
    body, rest = report.texts(closes=state.closes, limit=BODY_LIMIT - len(state.block()) - 10)
    forge.open_or_update_pull(repo, head=pull.head_ref, base=pull.base_ref, title=pull.title,
                              body=with_state(body, state), draft=True)
    _post_parts(forge, repo, pull.number, rest, state.last.tag)
    where = f"`{pull.head_ref}`"
    if commit is None:
        head = f"{failure}." if result.failed else "🤷 decode-bot made no further changes."
    elif result.completed:
        head = f"✅ Pushed {commit[:12]} to {where}: the work is finished."
    else:
        head = f"{failure}. The work so far ({commit[:12]}) is pushed to {where}." if result.failed else \
            f"⚠️ Pushed partial work ({commit[:12]}) to {where}: the run " \
            f"{STOP_MESSAGES.get(result.stop_reason, result.stop_reason)}; `/decode continue` carries it on."
    message = f"{head} The description of {pull.html_url} now covers all {len(state.runs)} runs.\n\n{figs}"
    return Conclusion.of_run(ran, message.rstrip(), pr_url=pull.html_url, branch=pull.head_ref)


def _to_fork(forge: Forge, repo: str, pull: PullInfo, ran: Ran, tag: str, *, report: Report,
             failure: str | None = None) -> Conclusion:
    """A fork's pull request: push to its head branch when maintainers may edit it, else reply with a patch.
    A failed run (`failure`: its one-line reason) says so first, then where its work so far went.

    The fork's commits are never pushed into the base repository, where its workflows would run with
    the base repository's secrets; only the agent's one commit goes to the fork's own branch.
    """
    ws, commit, state = ran.workspace, ran.result.commit, ran.result.state
    assert ws is not None and commit is not None
    started = ws.base_sha
    where = f"`{pull.head_repo}:{pull.head_ref}`"
    why = "the pull request does not allow edits by maintainers"
    if pull.maintainer_can_modify and pull.head_clone_url:
        try:
            ws.push(forge.token_for(repo), remote=pull.head_clone_url)
        except DecodeError as e:
            why = f"GitHub refused the push ({ws.redactor.redact(str(e))[:300]})"
        else:
            body, rest = report.texts(limit=BODY_LIMIT - 1000)
            _post_parts(forge, repo, pull.number, rest, tag)
            verb = "Pushed" if state == "success" else "Pushed partial work"
            head = f"{'✅' if state == 'success' else '⚠️'} {verb} {commit[:12]} to the fork's branch {where}, " \
                   f"on top of {started[:12]} (the head this run started from)."
            if failure:
                head = f"{failure}. The work so far ({commit[:12]}) is pushed to the fork's branch {where}, on " \
                       f"top of {started[:12]} (the head this run started from)."
            return Conclusion.of_run(ran, f"{head}\n\n{body}", branch=pull.head_ref)
    patch = ws.git("format-patch", "-1", "--stdout", "--binary", commit, what="writing the patch")
    parts = patch_parts(patch.decode("utf-8", "replace"), started_from=started, limit=BODY_LIMIT - 1000)
    body, rest = report.texts(limit=BODY_LIMIT - 1000 - len(parts[0]))
    _post_parts(forge, repo, pull.number, parts[1:] + rest, tag)
    head = (f"📎 decode-bot could not push to {where}: {why}. The change, made on top of {started[:12]} (the "
            "head this run started from), is in the patch below" + (" and the comments that follow" if
                                                                   len(parts) > 1 else "") + ".")
    if failure:
        head = f"{failure}. The work so far is not pushed to {where} ({why}); it is in the patch below."
    return Conclusion.of_run(ran, f"{head}\n\n{parts[0]}\n{body}")


def _post_parts(forge: Forge, repo: str, number: int, parts: list[str], run_tag: str) -> None:
    """Post the transcript parts that did not fit, each once even if the job is retried."""
    for i, part in enumerate(parts, 2):
        tag = marker("transcript", f"{run_tag}-{i}")
        if forge.find_comment(repo, number, tag) is None:
            forge.post_comment(repo, number, part + "\n" + tag, tag)
