"""The web UI's blueprints, in the order `create_app` registers them (docs/web.md)."""

from __future__ import annotations

from flask import Blueprint


def web_blueprints() -> list[Blueprint]:
    """The shared assets and session first, then the dashboard, the transcript pages and sign-in."""
    from bot.server.dashboard import home
    from bot.server.oauth import auth
    from bot.server.pages import runs
    from bot.server.web import web

    return [web, home, runs, auth]
