"""The /setup page's owner form as a browser reads it: attributes a browser shows as they are written."""

from __future__ import annotations

from html.parser import HTMLParser

from bot.config import Settings
from bot.server import create_app
from bot.server.setup import flow_of


class _Inputs(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.inputs: dict[str, dict[str, str | None]] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "input" and dict(attrs).get("id"):
            self.inputs[str(dict(attrs)["id"])] = dict(attrs)


def test_the_owner_placeholder_is_one_line(fake_github, tmp_path, store):
    """An input's placeholder may not hold a line break (HTML: the placeholder attribute); one written over
    two source lines showed a broken hint."""
    settings = Settings(data_dir=tmp_path / "data", github_api_url=fake_github.api_url,
                        public_url="https://decode.example.com")
    app = create_app(settings, store)
    page = app.test_client().get("/setup", query_string={"key": flow_of(app).key}).get_data(as_text=True)
    parser = _Inputs()
    parser.feed(page)
    assert parser.inputs["org"]["placeholder"] == "leave empty for your personal account"
