"""The GitHub App, tried offline in one command (`scripts/demo-app`).

Starts the repository's fake GitHub and fake Anthropic Messages API (tests/fakes: real
HTTP servers that PyGithub, git and the anthropic SDK talk to) on 127.0.0.1, a repository
`octo/calendar` with a real bug (examples/fix-weekend) and an issue about it, and the
real `decode serve` as a GitHub App pointed at them. Then it delivers `issues.labeled`
(label `agent`) as a signed webhook, exactly as GitHub signs it, waits for the pull
request, and prints its URL, its diff, the tracking comment and the run's live transcript page (the
fake GitHub serves the pull request's and the issue's pages, tests/fakes/github_web.py). The model replays the
recorded session of examples/fix-weekend/session.json. It keeps serving (open the page)
until Ctrl-C; `--exit` stops at once.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fakes.anthropic_api import FakeAnthropic  # noqa: E402
from tests.fakes.github import FakeGitHub  # noqa: E402
from tests.fakes.openapi import OpenApiRoutes, OpenApiUnavailable, load_routes  # noqa: E402

EXAMPLE = ROOT / "examples" / "fix-weekend"
OWNER, NAME, SECRET = "octo", "calendar", "demo-webhook-secret"


class AnyRoute(OpenApiRoutes):
    """Without the cached OpenAPI description (fetched once by the tests), the fake serves every route it has."""

    def __init__(self) -> None:
        super().__init__([])

    def match(self, method: str, path: str) -> str | None:
        return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what: str, condition, timeout: float, server: subprocess.Popen, log: Path):
    """`condition()`'s first true value; gives up, showing the server's log, after `timeout` or if it died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            sys.exit(f"decode serve exited ({server.returncode}) while waiting for {what}:\n{log.read_text()}")
        try:
            if value := condition():
                return value
        except OSError:
            pass
        time.sleep(0.2)
    sys.exit(f"timed out waiting for {what}; decode serve's log:\n{log.read_text()[-4000:]}")


def labeled(github: FakeGitHub, number: int) -> tuple[bytes, dict[str, str]]:
    """The issues.labeled delivery for issue `number` (https://docs.github.com/en/webhooks/webhook-events-and-payloads
    #issues), signed with X-Hub-Signature-256 as GitHub signs it."""
    issue = github.issue(OWNER, NAME, number)
    repo = github.repo(OWNER, NAME)
    payload = {"action": "labeled", "label": {"name": "agent"},
               "issue": {"number": number, "title": issue["title"], "body": issue["body"],
                         "user": {"login": "alice", "type": "User"}},
               "repository": {"id": repo.id, "full_name": f"{OWNER}/{NAME}", "name": NAME,
                              "owner": {"login": OWNER}},
               "sender": {"login": "alice", "type": "User"}, "installation": {"id": github.installation_id}}
    body = json.dumps(payload).encode()
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    return body, {"Content-Type": "application/json", "X-GitHub-Event": "issues", "X-GitHub-Delivery": "demo-1",
                  "X-Hub-Signature-256": signature}


def show(title: str, text: str) -> None:
    """A block of the demo's output: `title`, then `text` indented (so no line of it reads as a heading)."""
    print(f"{title}:", flush=True)
    print("".join(f"    {line}\n" for line in text.strip().splitlines()), end="", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(prog="scripts/demo-app", description=__doc__.split("\n\n")[0])
    parser.add_argument("--exit", action="store_true", help="stop once the pull request is open")
    args = parser.parse_args()
    session = json.loads((EXAMPLE / "session.json").read_text())
    work = Path(tempfile.mkdtemp(prefix="decode-app-demo."))
    try:
        routes = load_routes()  # from the cache when the tests fetched it; never needed for the demo itself
    except OpenApiUnavailable:
        routes = AnyRoute()
    with FakeGitHub(routes) as github, FakeAnthropic() as model:
        model.script(session["turns"], by_position=True)
        github.add_repo(OWNER, NAME, {p.name: p.read_text() for p in (EXAMPLE / "repo").iterdir()})
        github.add_user("alice")
        github.set_permission(OWNER, NAME, "alice", "write")
        number = github.add_issue(OWNER, NAME, "The weekend tests fail on Saturdays", session["task"], user="alice")
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        env = {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "HOME": str(work / "home"),
               "PYTHONPATH": str(ROOT), "GITHUB_WEBHOOK_SECRET": SECRET, "GITHUB_APP_ID": str(github.app_id),
               "GITHUB_APP_PRIVATE_KEY": github.private_key_pem, "GITHUB_API_URL": github.api_url,
               "ANTHROPIC_API_KEY": model.api_key, "ANTHROPIC_BASE_URL": model.url, "DECODE_PUBLIC_URL": url,
               "SANDBOX_MODE": os.environ.get("SANDBOX_MODE", "docker"), "DECODE_DATA_DIR": str(work / "data")}
        log = work / "serve.log"
        print(f"fake GitHub {github.api_url}, fake Anthropic {model.url}; decode serve on {url} "
              f"(SANDBOX_MODE={env['SANDBOX_MODE']}, log {log})", flush=True)
        with open(log, "ab") as out:
            server = subprocess.Popen([str(Path(sys.executable).with_name("decode")), "serve", "--port", str(port)],
                                      env=env, stdout=out, stderr=out)
        try:
            wait_for("decode serve", lambda: urllib.request.urlopen(url + "/healthz", timeout=1), 60, server, log)
            body, headers = labeled(github, number)
            request = urllib.request.Request(url + "/webhook", data=body, headers=headers, method="POST")
            with urllib.request.urlopen(request, timeout=10) as answer:
                print(f"issue #{number} labeled `agent`: signed webhook delivered, {answer.status}", flush=True)
            [pr] = wait_for("the pull request", lambda: github.pulls(OWNER, NAME), 300, server, log)
            report = wait_for("the tracking comment's result", lambda: [
                c["body"] for c in github.comments(OWNER, NAME, number) if "Opened" in c["body"]], 60, server, log)
            page = re.search(re.escape(url) + r"/runs/[^\s)\"']+", report[0])
            print(f"pull request: {pr['html_url']} ({pr['title']})", flush=True)
            show(f"its diff ({pr['diff_url']})", urllib.request.urlopen(pr["diff_url"], timeout=10).read().decode())
            show(f"the tracking comment on issue #{number} ({github.issue(OWNER, NAME, number)['html_url']})",
                 report[0])
            print(f"transcript page: {page.group(0) if page else 'not linked'}", flush=True)
            if not args.exit:
                print("serving until Ctrl-C", flush=True)
                while True:
                    signal.pause()
        except KeyboardInterrupt:
            pass
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=60)
    return 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _interrupt)  # like Ctrl-C: stop decode serve and the fakes
    sys.exit(main())
