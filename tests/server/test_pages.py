"""GET /runs/<id>?exp=...&sig=...: the signed transcript page, its live endpoint, and what survives sanitizing."""

from __future__ import annotations

import re
import time
from html.parser import HTMLParser

import pytest

from bot.github.links import run_path
from bot.server.render import safe_html
from bot.jobs.sqlite import Store
from tests.support.runs import add_run, append, turn, web_app, write_run


@pytest.fixture
def env(tmp_path):
    store = Store(tmp_path / "jobs.sqlite3")
    app = web_app(tmp_path, store)
    yield app, app.test_client(), store, tmp_path
    store.close()


def query(app, run_id, **kw):
    """The query string of a fresh signed link to `run_id`."""
    return run_path(app.extensions["decode"].settings.store, run_id, **kw).split("?", 1)[1]


def test_a_signed_link_shows_the_transcript_with_strict_headers(env):
    app, client, store, data = env
    run_id = add_run(client, store, repo="octo/app", number=1, state="done")
    write_run(data, run_id, [{"type": "run_start", "task": "Fix the date parser", "repo": "octo/app"},
                             *turn(1, "Looking at the parser")],
              record={"turns": 1, "cost_usd": 0.01, "wall_s": 3, "stop_reason": "completed"})
    page = client.get(f"/runs/{run_id}?{query(app, run_id)}")
    assert page.status_code == 200
    text = page.get_data(as_text=True)
    assert "Looking at the parser" in text and "Fix the date parser" in text and 'data-live="false"' in text
    csp = page.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "default-src 'none'" in csp and "unsafe-inline" not in csp
    assert page.headers["Referrer-Policy"] == "no-referrer"  # the URL holds the signature
    assert page.headers["X-Frame-Options"] == "DENY" and page.headers["X-Content-Type-Options"] == "nosniff"
    assert re.findall(r"<script[^>]*>", text) == ['<script src="/assets/live.js">']


def test_thinking_shows_as_a_quote_and_never_its_signature(env):
    app, client, store, data = env
    run_id = add_run(client, store, repo="octo/app", number=2, state="done")
    thinking = {"type": "thinking", "thinking": "The parser drops the year.", "signature": "U2lnbmF0dXJlT2ZUaGlz"}
    first = turn(1, "Fixing the parser")
    first[0]["content"] = [thinking, {"type": "redacted_thinking", "data": "RW5jcnlwdGVk"}, *first[0]["content"]]
    write_run(data, run_id, [{"type": "run_start", "task": "Fix it", "repo": "octo/app", "thinking": "adaptive"},
                             *first], record={"turns": 1, "cost_usd": 0.01, "wall_s": 3, "stop_reason": "completed"})
    text = client.get(f"/runs/{run_id}?{query(app, run_id)}").get_data(as_text=True)
    assert "<blockquote>\n<p>The parser drops the year.</p>" in text and "thinking the API keeps encrypted" in text
    assert "thinking <code>adaptive</code>" in text
    assert "U2lnbmF0dXJlT2ZUaGlz" not in text and "RW5jcnlwdGVk" not in text


def test_a_bad_signature_is_the_same_404_as_an_unknown_run(env):
    app, client, store, data = env
    run_id = add_run(client, store, repo="octo/app", number=1, state="running")
    write_run(data, run_id, turn(1, "secret work"))
    answers = [client.get(url) for url in (
        f"/runs/{run_id}", f"/runs/{run_id}?sig=", f"/runs/{run_id}?exp=9999999999&sig={'0' * 64}",
        f"/runs/{run_id}?{query(app, 'job-2')}", f"/runs/job-99?{query(app, 'job-99')}",
        f"/runs/{run_id}?{re.sub('exp=[0-9]+', 'exp=9999999999', query(app, run_id))}",  # a longer life
        f"/runs/{run_id}/events?exp=9999999999&sig={'0' * 64}", f"/runs/job-99/events?{query(app, 'job-99')}")]
    assert {a.status_code for a in answers} == {404}
    assert len({a.data for a in answers}) == 1
    assert all(b"secret work" not in a.data for a in answers)


def test_an_expired_link_is_refused_and_says_how_to_see_the_run(env):
    app, client, store, data = env
    run_id = add_run(client, store, repo="octo/secret", number=1, state="done")
    write_run(data, run_id, turn(1, "secret work"), record={"stop_reason": "completed"})
    made = time.time() - 31 * 86400  # DECODE_KEEP_DAYS is 30 by default
    for url in (f"/runs/{run_id}?{query(app, run_id, now=made)}",
                f"/runs/{run_id}/events?{query(app, run_id, now=made)}&after=0"):
        answer = client.get(url)
        text = answer.get_data(as_text=True)
        assert answer.status_code == 410 and "secret work" not in text
        assert "This link has expired" in text and "sign in on the dashboard" in text
    assert client.get(f"/runs/{run_id}?{query(app, run_id, now=time.time() - 29 * 86400)}").status_code == 200


def test_the_latest_attempt_is_shown(env):
    app, client, store, data = env
    run_id = add_run(client, store, repo="octo/app", number=1, state="running")
    write_run(data, run_id, turn(1, "first attempt"), record={"stop_reason": "error"})
    (data / "runs" / f"{run_id}.2").mkdir(parents=True)
    append(data / "runs" / f"{run_id}.2", turn(1, "second attempt"))
    text = client.get(f"/runs/{run_id}?{query(app, run_id)}").get_data(as_text=True)
    assert "second attempt" in text and "first attempt" not in text and 'data-live="true"' in text


def test_a_queued_job_has_a_page_that_waits_for_it(env):
    app, client, store, _ = env
    run_id = add_run(client, store, repo="octo/app", number=1)
    text = client.get(f"/runs/{run_id}?{query(app, run_id)}").get_data(as_text=True)
    assert "has not started yet" in text and 'data-live="true"' in text


def test_the_events_endpoint_sends_only_what_is_new(env):
    app, client, store, data = env
    run_id = add_run(client, store, repo="octo/app", number=1, state="running")
    directory = write_run(data, run_id, turn(1, "turn one"))
    url = f"/runs/{run_id}/events?{query(app, run_id)}"
    first = client.get(url + "&after=0&size=0").get_json()
    assert first["live"] and "turn one" in first["open"] and first["state"] == "running"
    assert "open" not in client.get(url + f"&after={first['after']}&size={first['size']}").get_json()
    append(directory, turn(2, "turn two"))
    grown = client.get(url + f"&after={first['after']}&size={first['size']}").get_json()
    assert "turn one" in grown["done"] and "turn two" in grown["open"] and grown["after"] > first["after"]
    append(directory, turn(3, "turn three"))
    news = client.get(url + f"&after={grown['after']}&size={grown['size']}").get_json()
    assert "turn two" in news["done"] and "turn three" in news["open"] and "turn one" not in str(news)
    assert "<td>3</td>" in news["head"]  # the figures so far
    store.finish(int(run_id.removeprefix("job-")), "web-test-worker", "done", result={"state": "done"})
    (directory / "record.json").write_text('{"stop_reason": "completed"}')
    final = client.get(url + f"&after={news['after']}&size={news['size']}").get_json()
    assert final["live"] is False and final["state"] == "done" and "turn three" in final["done"] + final["open"]


def test_a_long_run_shows_a_page_of_turns_with_links_to_the_others(env):
    app, client, store, data = env
    run_id = add_run(client, store, repo="octo/app", number=1, state="done")
    events = [{"type": "run_start", "task": "A long one", "repo": "octo/app"}]
    for n in range(1, 501):
        events += turn(n, f"step {n} here")
    write_run(data, run_id, events + [{"type": "run_end", "stop_reason": "completed", "summary": "All done.",
                                       "turns": 500}], record={"stop_reason": "completed"})
    first = client.get(f"/runs/{run_id}?{query(app, run_id)}").get_data(as_text=True)
    assert "step 1 here" in first and "step 50 here" in first and "step 51 here" not in first
    assert "turns page 1 of 10" in first and "page=10" in first and "All done." not in first
    assert "<td>500</td>" in first  # the figures are the whole run's
    last = client.get(f"/runs/{run_id}?{query(app, run_id)}&page=10").get_data(as_text=True)
    assert "step 451 here" in last and "step 450 here" not in last and "All done." in last
    assert len(last) < len(first) * 2 and len(first) < 100_000  # a page costs its turns, not the run


HOSTILE = [
    "<script>alert(1)</script>", "<img src=x onerror=alert(2)>", "[click](javascript:alert(3))",
    "<a href=\"javascript:alert(4)\">x</a>", "<svg onload=alert(5)>", "<iframe src=//evil.example>",
    "<details open ontoggle=alert(6)>", "<a href=\"&#106;avascript:alert(7)\">y</a>", "<style>*{x:1}</style>",
    "</code></pre><script>alert(8)</script>", "````\n<script>alert(9)</script>", "<math><mi xlink:href=javascript:1>",
]


class _Active(HTMLParser):
    """Whatever in a piece of HTML a browser would run or load: tags other than formatting, `on*`
    attributes, URLs other than http(s) and mailto."""

    SAFE_TAGS = {"a", "p", "pre", "code", "em", "strong", "del", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol",
                 "li", "blockquote", "table", "thead", "tbody", "tr", "th", "td", "details", "summary", "hr", "br",
                 "div"}  # the page's own wrappers (head, finished turns, the turn under way); the sanitizer drops any other

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in self.SAFE_TAGS:
            self.found.append(f"<{tag}>")
        for name, value in attrs:
            if name.startswith("on") or name in ("style", "src", "srcdoc", "formaction"):
                self.found.append(f"{tag}[{name}]")
            if name == "href" and not re.match(r"(https?:|mailto:)", (value or "").strip(), re.I):
                self.found.append(f"{tag}[href={value}]")


def active(html: str) -> list[str]:
    parser = _Active()
    parser.feed(html)
    return parser.found


def test_a_hostile_transcript_renders_without_script_handlers_or_javascript_urls(env):
    app, client, store, data = env
    run_id = add_run(client, store, repo="octo/app", number=1, state="done")
    payload = "\n".join(HOSTILE)
    write_run(data, run_id, [
        {"type": "run_start", "task": payload, "repo": "octo/app<script>alert(0)</script>"},
        {"type": "model_request", "turn": 1, "new_messages": [{"role": "user", "content": payload}]},
        *turn(1, payload, command=payload, output=payload),
        {"type": "note", "text": payload},
        {"type": "setup", "command": payload, "output": payload, "exit_code": 1, "duration_s": 1},
        {"type": "run_end", "stop_reason": "error", "summary": payload, "error": payload},
    ], record={"stop_reason": "error"})
    text = client.get(f"/runs/{run_id}?{query(app, run_id)}").get_data(as_text=True)
    body = text[text.index('<article id="transcript"'):text.index("</article>")]
    html = body[body.index(">") + 1:]
    assert active(html) == []
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # shown as text, not run
    live = client.get(f"/runs/{run_id}/events?{query(app, run_id)}&after=0").get_json()
    assert active(live["head"] + live["done"] + live["open"]) == []


@pytest.mark.parametrize("hostile", HOSTILE + ['<a href="https://example.org" onclick="x()">ok</a>'])
def test_the_sanitizer_is_the_last_wall_even_for_raw_html(hostile):
    assert active(safe_html(hostile)) == []


@pytest.mark.parametrize("code,kept", [
    ('<code class="badge failed">x</code>', "<code>x</code>"),
    ('<code class="language-python badge">x</code>', '<code class="language-python">x</code>'),
    ('<code class="run-head language-c++ language-js">x</code>', '<code class="language-c++ language-js">x</code>'),
    ('<code class="language-">x</code>', "<code>x</code>"),
])
def test_code_keeps_only_language_classes(code, kept):
    """The page escapes raw HTML before markdown (the hostile test above), so the sanitizer is the last wall:
    a class of the page's own (a `badge failed`) never reaches it."""
    assert safe_html(f"<p>{code}</p>") == f"<p>{kept}</p>"


def test_links_and_code_survive_sanitizing():
    html = safe_html('<p><a href="https://github.com/o/r/pull/1">PR</a> <code class="language-python">x</code></p>')
    assert 'href="https://github.com/o/r/pull/1"' in html and 'rel="noopener noreferrer nofollow"' in html
    assert 'class="language-python"' in html
