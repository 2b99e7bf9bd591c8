"""The web UI in a real headless Chromium: sign-in through the fake GitHub, the dashboard, a live transcript."""

from __future__ import annotations

from datetime import datetime, timezone

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from bot.github.links import run_path
from bot.jobs.sqlite import Store
from bot.jobs.store import Caps
from tests.fakes.github_oauth import sign_in_as
from tests.support.browser import browser  # noqa: F401 (fixture)
from tests.support.runs import add_run, append, github_app, serving, turn, web_app, write_run


def text_of(browser, css: str) -> str:
    found = browser.driver.find_elements(By.CSS_SELECTOR, css)
    return found[0].text if found else ""


def open_dashboard_as_alice(browser, url: str) -> None:
    """Open the dashboard and sign in through the fake GitHub (which answers as alice, `sign_in_as`)."""
    browser.get(url + "/")
    browser.driver.find_element(By.ID, "sign-in").click()
    browser.wait_for(lambda: "alice" in text_of(browser, ".who"), what="the signed-in dashboard")


def test_sign_in_through_github_and_see_runs_in_three_states(browser, fake_github, tmp_path):
    fake_github.add_repo("octo", "app")
    fake_github.add_repo("octo", "vault", private=True)
    fake_github.set_permission("octo", "app", "alice", "write")
    store = Store(tmp_path / "jobs.sqlite3")
    app = github_app(tmp_path, store, fake_github)
    setup = app.test_client()
    done = add_run(setup, store, repo="octo/app", number=1, state="done", result={
        "state": "done", "pr_url": f"{fake_github.web_url}/octo/app/pull/5",
        "figures": {"turns": 6, "seconds": 95.0, "cost_usd": 0.84, "tokens": {}}})
    failed = add_run(setup, store, repo="octo/app", number=2, sender="carol", state="failed", error="no budget left")
    write_run(tmp_path, failed, turn(1, "x"), record={"turns": 1, "cost_usd": 0.01, "wall_s": 4.0})
    add_run(setup, store, repo="octo/vault", number=3, sender="mallory", state="done")  # alice cannot read it
    running = add_run(setup, store, repo="octo/app", number=4, state="running")
    write_run(tmp_path, running, turn(1, "a"))
    sign_in_as(fake_github, "alice")
    with serving(app) as url:
        open_dashboard_as_alice(browser, url)
        rows = browser.driver.find_elements(By.CSS_SELECTOR, "tr.run")
        assert [r.get_attribute("data-run") for r in rows] == [running, failed, done]
        assert [r.find_element(By.CSS_SELECTOR, ".badge").text for r in rows] == ["running", "failed", "done"]
        assert "octo/vault" not in browser.driver.page_source and "mallory" not in browser.driver.page_source
        assert "$0.84" in rows[2].text and "1m 35s" in rows[2].text
        browser.shot("dashboard")
        Select(browser.driver.find_element(By.ID, "filter-state")).select_by_value("failed")
        browser.driver.find_element(By.CSS_SELECTOR, ".filters button").click()
        browser.wait_for(lambda: "state=failed" in browser.driver.current_url, what="the filtered dashboard")
        rows = browser.driver.find_elements(By.CSS_SELECTOR, "tr.run")
        assert [r.get_attribute("data-run") for r in rows] == [failed]
        browser.shot("dashboard-failed")
        browser.driver.find_element(By.ID, "sign-out").click()
        browser.wait_for(lambda: browser.driver.find_elements(By.ID, "sign-in"), what="the signed-out page")
        assert browser.driver.find_elements(By.CSS_SELECTOR, "tr.run") == []
    store.close()


def test_a_live_transcript_shows_a_new_turn_without_reloading(browser, tmp_path):
    store = Store(tmp_path / "jobs.sqlite3")
    app = web_app(tmp_path, store)
    run_id = add_run(app.test_client(), store, repo="octo/app", number=1, state="running")
    directory = write_run(tmp_path, run_id, [{"type": "run_start", "task": "Fix it", "repo": "octo/app"},
                                             *turn(1, "Reading the code first")])
    with serving(app) as url:
        browser.get(url + run_path(app.extensions["decode"].settings.store, run_id))
        assert "Reading the code first" in text_of(browser, "#transcript")
        browser.driver.execute_script("window.samePage = 'yes'")
        browser.shot("live-before")
        append(directory, turn(2, "Now the second turn arrives", command="pytest -q", output="3 passed"))
        browser.wait_for(lambda: "Now the second turn arrives" in text_of(browser, "#transcript"),
                         timeout=10, what="the second turn")
        assert browser.driver.execute_script("return window.samePage") == "yes"  # not reloaded
        assert "Turn 2" in text_of(browser, "#transcript") and "3 passed" in text_of(browser, "#transcript")
        browser.shot("live-after")
        store.finish(int(run_id.removeprefix("job-")), "web-test-worker", "done", result={"state": "done"})
        append(directory, [{"type": "run_end", "stop_reason": "completed", "summary": "All fixed."}])
        (directory / "record.json").write_text('{"stop_reason": "completed"}')
        browser.wait_for(lambda: text_of(browser, "#run-state") == "done", timeout=10, what="the run to end")
        assert "All fixed." in text_of(browser, "#transcript")
    store.close()


def test_the_dashboard_shows_the_queue_with_places_reasons_and_times(browser, fake_github, tmp_path):
    fake_github.add_repo("octo", "app")
    fake_github.add_repo("octo", "vault", private=True)
    fake_github.set_permission("octo", "app", "alice", "write")
    store = Store(tmp_path / "jobs.sqlite3", caps=Caps(per_repo=1))
    app = github_app(tmp_path, store, fake_github)
    setup = app.test_client()
    add_run(setup, store, repo="octo/app", number=3, state="running")
    first = add_run(setup, store, repo="octo/app", number=1)
    add_run(setup, store, repo="octo/vault", number=5, sender="mallory")  # ahead of #2, but alice cannot read it
    add_run(setup, store, repo="octo/app", number=2)
    sign_in_as(fake_github, "alice")
    with serving(app) as url:
        open_dashboard_as_alice(browser, url)
        rows = browser.driver.find_elements(By.CSS_SELECTOR, "#queue tr.waiting")
        assert [r.get_attribute("data-position") for r in rows] == ["1", "3"]
        assert [r.find_element(By.CSS_SELECTOR, "a").text for r in rows] == ["#1", "#2"]
        assert {r.find_element(By.CSS_SELECTOR, ".reason").text for r in rows} == {
            "waiting: octo/app already has 1 run going (the cap is 1)"}
        queued_at = datetime.fromtimestamp(store.job(int(first.removeprefix("job-"))).created_at, timezone.utc)
        assert queued_at.strftime("%Y-%m-%d %H:%M") in rows[0].text and "UTC" in rows[0].text
        assert "octo/vault" not in browser.driver.page_source
        browser.shot("dashboard-queue")
    store.close()
