"""One-click setup in a real headless Chromium against a real `decode serve` started without App credentials:
the page posts the manifest to the fake GitHub, the callback keeps the App (0600), and the SAME process then
takes a signed delivery and its worker pool turns it into a pull request, without a restart."""

from __future__ import annotations

import json
import stat
import urllib.error
import urllib.request

from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By

from tests.fakes.webhook_examples import example
from tests.support.browser import browser  # noqa: F401 (fixture)
from tests.support.server import NAME, OWNER, Server, env, free_port, setup_link, wait_for  # noqa: F401 (fixture)

NOTES = [[{"type": "tool_use", "name": "bash", "input": {"command": "echo noted >> NOTES.md"}}],
         [{"type": "text", "text": "Wrote the notes."}]]
APP_VARIABLES = ("GITHUB_APP_ID", "GITHUB_APP_PRIVATE_KEY", "GITHUB_WEBHOOK_SECRET")


def webhook(server: Server) -> tuple[int, dict]:
    request = urllib.request.Request(server.url + "/webhook", data=b"{}", method="POST",
                                     headers={"X-GitHub-Event": "ping", "X-GitHub-Delivery": "1"})
    try:
        with urllib.request.urlopen(request, timeout=10) as res:
            return res.status, json.loads(res.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_setup_in_the_browser_then_the_same_server_runs_as_the_new_app(
        env, fake_github, fake_anthropic, browser, tmp_path):  # noqa: F811 (fixture)
    fake_anthropic.script(NOTES, by_position=True)
    port = free_port()
    public = f"http://127.0.0.1:{port}"
    setup_env = {**{k: v for k, v in env.items() if k not in APP_VARIABLES}, "DECODE_PUBLIC_URL": public}
    log = tmp_path / "serve.log"
    server = Server(setup_env, log, port=port)
    try:
        status, answer = webhook(server)
        assert status == 503 and "finish setup at /setup" in answer["error"], answer
        link = setup_link(log.read_text())
        assert link.startswith(f"{public}/setup?key=")

        browser.get(link)
        browser.driver.find_element(By.ID, "org").send_keys("acme")
        browser.driver.find_element(By.ID, "owner").click()

        def create_for_acme():  # the page reloads for the organization: wait for the new page's button
            try:
                return [b for b in browser.driver.find_elements(By.ID, "create") if "for acme" in b.text]
            except StaleElementReferenceException:
                return []
        button = browser.wait_for(create_for_acme, what="the create button for acme")[0]
        browser.shot("setup-form")
        action = browser.driver.find_element(By.CSS_SELECTOR, "form[method=post]").get_attribute("action")
        button.click()
        browser.wait_for(lambda: browser.driver.find_elements(By.ID, "configured"), what="the configured page")
        browser.shot("setup-done")

        [sent] = fake_github.manifests
        manifest = sent["manifest"]
        assert sent["owner"] == "acme" and action.endswith(f"?state={sent['state']}")
        assert action.startswith(f"{fake_github.web_url}/organizations/acme/settings/apps/new?state=")
        assert manifest["hook_attributes"]["url"] == f"{public}/webhook"
        assert manifest["redirect_url"] == f"{public}/setup/callback"
        assert manifest["callback_urls"] == [f"{public}/login/callback"] and manifest["public"] is False
        assert manifest["default_permissions"] == {"contents": "write", "issues": "write", "pull_requests": "write",
                                                   "metadata": "read", "actions": "read", "checks": "write"}
        assert {"issues", "issue_comment", "pull_request_review_comment"} <= set(manifest["default_events"])

        path = tmp_path / "data" / "app.json"
        saved = json.loads(path.read_text())
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        [made] = fake_github.created_apps
        assert (saved["id"], saved["slug"], saved["pem"]) == (made["id"], made["slug"], fake_github.private_key_pem)
        install = browser.driver.find_element(By.ID, "install").get_attribute("href")
        assert install == f"{saved['html_url']}/installations/new"
        assert not browser.driver.find_elements(By.ID, "create")

        number = fake_github.add_issue(OWNER, NAME, "Write notes", "Please.", user="alice")
        issue = example("issues", "labeled", repo=f"{OWNER}/{NAME}", sender="alice", sender_type="User",
                        issue__number=number, issue__title="Write notes", issue__body="Please.", label__name="agent")
        assert server.post("issues", issue, secret=saved["webhook_secret"]) == 202
        [pr] = wait_for(lambda: fake_github.pulls(OWNER, NAME), what="the pull request by the new App's workers")
        assert pr["user"]["login"] == f"{saved['slug']}[bot]" and f"Fixes #{number}" in pr["body"]
        assert server.proc.poll() is None  # the same process throughout
    finally:
        assert server.stop() == 0
    text = log.read_text()
    for secret in (saved["pem"].splitlines()[1], saved["webhook_secret"], saved["client_secret"]):
        assert secret not in text
