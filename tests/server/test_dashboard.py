"""GET /: who sees which runs, the filters, the per-day totals, and `Store.runs` under them."""

from __future__ import annotations

import re
import stat

import pytest

from bot.github.links import Link, check
from bot.jobs.sqlite import Store
from bot.model.protocol import Usage
from bot.run.result import Figures, RunResult, write_record
from tests.support.runs import WORKER, add_run, sign_in, turn, web_app, write_run

OAUTH = {"github_client_id": "Iv23li0client", "github_client_secret": "client-secret-value-123"}


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """Four runs, made once for the module: the tests only read them (each signs in its own client)."""
    tmp_path = tmp_path_factory.mktemp("dashboard")
    store = Store(tmp_path / "jobs.sqlite3")
    app = web_app(tmp_path, store, **OAUTH)
    client = app.test_client()
    runs = {
        "app-done": add_run(client, store, repo="octo/app", number=1, sender="alice", state="done", result={
            "state": "done", "pr_url": "https://github.com/octo/app/pull/9", "branch": "decode/issue-1-x",
            "figures": {"turns": 7, "seconds": 125.0, "cost_usd": 1.25, "tokens": {"input": 10}}}),
        "app-failed": add_run(client, store, repo="octo/app", number=2, sender="carol", state="failed",
                              error="the model refused the key", result={"pr_url": "javascript:alert(1)"}),
        "secret": add_run(client, store, repo="octo/secret_repo", number=3, sender="bob", state="done"),
        "app-running": add_run(client, store, repo="Octo/App", number=4, sender="alice", state="running"),
    }
    write_run(tmp_path, runs["app-failed"], turn(1, "x"),
              record={"turns": 2, "cost_usd": 0.5, "wall_s": 30.0, "stop_reason": "error"})
    write_run(tmp_path, runs["app-running"], turn(1, "a") + turn(2, "b"))
    yield app, client, store, tmp_path, runs
    store.close()


def shown(response) -> list[str]:
    return re.findall(r'data-run="(job-\d+)"', response.get_data(as_text=True))


def test_without_oauth_credentials_the_dashboard_says_how_to_set_them(tmp_path):
    store = Store(tmp_path / "jobs.sqlite3")
    client = web_app(tmp_path, store).test_client()
    add_run(client, store, repo="octo/app", number=1)
    page = client.get("/")
    text = page.get_data(as_text=True)
    assert page.status_code == 200 and "GITHUB_CLIENT_ID" in text and "GITHUB_CLIENT_SECRET" in text
    assert "octo/app" not in text and shown(page) == []
    assert client.get("/login").status_code == 302 and client.get("/login").location == "/"
    store.close()


def test_a_visitor_who_is_not_signed_in_sees_no_runs(env):
    _, client, *_ = env
    page = client.get("/")
    assert shown(page) == [] and 'href="/login"' in page.get_data(as_text=True)
    assert "client-secret-value" not in page.get_data(as_text=True)


def test_two_users_see_only_the_runs_of_repositories_they_can_read(env):
    app, client, _, data, runs = env
    sign_in(client, data, "alice", {"octo/app"})
    assert shown(client.get("/")) == [runs["app-running"], runs["app-failed"], runs["app-done"]]
    other = app.test_client()
    sign_in(other, data, "bob", {"octo/secret_repo"})
    assert shown(other.get("/")) == [runs["secret"]]
    assert shown(other.get("/?repo=octo/app")) == []  # a filter never widens what one may see


def test_filters_by_repository_and_state(env):
    _, client, _, data, runs = env
    sign_in(client, data, "alice", {"octo/app", "octo/secret_repo"})
    assert shown(client.get("/?state=done")) == [runs["secret"], runs["app-done"]]
    assert shown(client.get("/?repo=OCTO/app&state=done")) == [runs["app-done"]]
    assert shown(client.get("/?repo=octo/secret_repo")) == [runs["secret"]]
    assert len(shown(client.get("/?state=nonsense"))) == 4  # an unknown state is no filter


def test_rows_carry_figures_links_and_daily_totals(env):
    app, client, _, data, runs = env
    sign_in(client, data, "alice", {"octo/app"})
    text = client.get("/").get_data(as_text=True)
    settings = app.extensions["decode"].settings
    done = text[text.index(f'data-run="{runs["app-done"]}"'):].split("</tr>")[0]
    assert ">7<" in done and "$1.25" in done and "2m 05s" in done and ">issue<" in done and ">alice<" in done
    assert 'href="https://github.com/octo/app/issues/1"' in done
    assert 'href="https://github.com/octo/app/pull/9"' in done
    [(exp, sig)] = re.findall(rf'href="/runs/{runs["app-done"]}\?exp=([0-9]+)&amp;sig=([0-9a-f]+)"', done)
    assert check(settings.store, runs["app-done"], exp, sig) is Link.GOOD
    failed = text[text.index(f'data-run="{runs["app-failed"]}"'):].split("</tr>")[0]
    assert "$0.50" in failed and "30s" in failed and "javascript:" not in failed  # figures from record.json
    assert 'title="the model refused the key"' in failed
    running = text[text.index(f'data-run="{runs["app-running"]}"'):].split("</tr>")[0]
    assert ">2<" in running and "$0.03" in running  # a live run's figures so far, from its transcript
    totals = text[text.index('id="totals"'):]
    assert re.search(r"<td>\d{4}-\d\d-\d\d</td><td class=\"num\">3</td><td class=\"num\">\$1\.78</td>", totals)


def test_an_expired_or_forged_session_shows_no_runs(env):
    app, client, _, data, _ = env
    current = app.test_client()
    sign_in(current, data, "alice", {"octo/app"})
    assert shown(current.get("/")) != []  # the same sign-in, still valid, does show alice's runs
    sign_in(client, data, "alice", {"octo/app"}, lifetime_s=-1)
    assert shown(client.get("/")) == []
    forged = app.test_client()
    with forged.session_transaction() as session:
        session["sid"] = "made-up"
    assert shown(forged.get("/")) == []


def test_sign_out_needs_the_page_token_and_ends_the_session(env):
    app, client, _, data, runs = env
    sign_in(client, data, "alice", {"octo/app"})
    cookie = client.get_cookie("decode_session").value
    client.post("/logout", data={"csrf": "wrong"})
    assert shown(client.get("/")) != []
    assert client.post("/logout", data={"csrf": "test-csrf"}).status_code == 302
    assert shown(client.get("/")) == []
    replay = app.test_client()
    replay.set_cookie("decode_session", cookie)
    assert shown(replay.get("/")) == []  # a copied cookie is dead once its user signed out
    files = list((data / "sessions").iterdir())
    assert files == [] or all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files)


def test_store_runs_newest_first_with_filters(tmp_path):
    store = Store(tmp_path / "jobs.sqlite3")
    client = web_app(tmp_path, store).test_client()
    ids = [add_run(client, store, repo=repo, number=n) for n, repo in enumerate(
        ["a/x_y", "a/xzy", "A/X_Y", "b/c"], start=1)]
    numbers = [int(i.removeprefix("job-")) for i in ids]
    assert [j.id for j in store.runs()] == numbers[::-1]
    assert [j.id for j in store.runs(2)] == numbers[:1:-1]
    assert [j.id for j in store.runs(repos={"a/x_y"})] == [numbers[2], numbers[0]]  # "_" is no wildcard
    assert store.runs(repos=set()) == []
    assert [j.id for j in store.runs(repos={"b/c", "a/xzy"}, state="queued")] == [numbers[3], numbers[1]]
    assert store.runs(state="done") == []
    store.close()


def test_a_row_reads_the_run_result_the_runner_stored_and_a_record_of_the_same_shape(tmp_path):
    store = Store(tmp_path / "jobs.sqlite3")
    client = web_app(tmp_path, store, **OAUTH).test_client()
    figures = Figures(turns=5, usage=Usage(input_tokens=10), cost_usd=2.5, seconds=61.0)
    stored = add_run(client, store, repo="octo/app", number=1, state="done", result=RunResult(
        "job-1", "success", pr_url="https://github.com/octo/app/pull/3", figures=figures).to_json())
    died = add_run(client, store, repo="octo/app", number=2, state="failed", error="the worker died")
    directory = tmp_path / "runs" / died
    directory.mkdir(parents=True)
    write_record(directory, RunResult(died, "failed", figures=Figures(turns=1, cost_usd=0.75, seconds=4.0)))
    sign_in(client, tmp_path, "alice", {"octo/app"})
    text = client.get("/").get_data(as_text=True)
    row = text[text.index(f'data-run="{stored}"'):].split("</tr>")[0]
    assert ">5<" in row and "$2.50" in row and "1m 01s" in row and 'href="https://github.com/octo/app/pull/3"' in row
    row = text[text.index(f'data-run="{died}"'):].split("</tr>")[0]
    assert ">1<" in row and "$0.75" in row and ">4s<" in row and 'title="the worker died"' in row
    store.close()


def test_a_job_waiting_to_run_again_shows_running_with_why_it_waits(tmp_path):
    store = Store(tmp_path / "jobs.sqlite3")
    client = web_app(tmp_path, store, **OAUTH).test_client()
    waiting = add_run(client, store, repo="octo/app", number=1, state="running")
    assert store.defer(int(waiting.removeprefix("job-")), WORKER, 600, "GitHub did not answer: Server Error: 502")
    sign_in(client, tmp_path, "alice", {"octo/app"})
    text = client.get("/").get_data(as_text=True)
    row = text[text.index(f'data-run="{waiting}"'):].split("</tr>")[0]
    assert ">running<" in row and 'title="GitHub did not answer: Server Error: 502"' in row
    store.close()


def test_many_runs_are_listed_a_page_at_a_time_with_a_link_to_the_older_ones(tmp_path):
    store = Store(tmp_path / "jobs.sqlite3")
    app = web_app(tmp_path, store, **OAUTH)
    client = app.test_client()
    made = [add_run(client, store, repo="octo/app", number=n) for n in range(1, 53)]
    sign_in(client, tmp_path, "alice", {"octo/app"})
    first = client.get("/")
    assert shown(first) == made[::-1][:50]
    [older] = re.findall(r'id="older" href="([^"]+)"', first.get_data(as_text=True))
    second = client.get(older.replace("&amp;", "&"))
    assert shown(second) == [made[1], made[0]] and 'id="older"' not in second.get_data(as_text=True)
    store.close()


def test_a_long_queue_is_shown_a_page_of_places_at_a_time_with_a_link_to_the_later_ones(tmp_path):
    store = Store(tmp_path / "jobs.sqlite3")
    client = web_app(tmp_path, store, **OAUTH).test_client()
    payload = store.job(int(add_run(client, store, repo="octo/app", number=1)[4:])).payload
    for n in range(2, 56):  # as the webhook queues them, without 54 deliveries
        store.record_delivery(f"d-{n}", "issues", "queued", (f"octo/app#{n}", payload))
    sign_in(client, tmp_path, "alice", {"octo/app"})
    first = client.get("/")
    assert re.findall(r'data-position="(\d+)"', first.get_data(as_text=True)) == [str(p) for p in range(1, 51)]
    [later] = re.findall(r'id="later" href="([^"]+)"', first.get_data(as_text=True))
    second = client.get(later.replace("&amp;", "&"))
    assert re.findall(r'data-position="(\d+)"', second.get_data(as_text=True)) == [str(p) for p in range(51, 56)]
    assert 'id="later"' not in second.get_data(as_text=True)
    assert shown(second) == shown(first)  # the runs stay on their own page
    store.close()
