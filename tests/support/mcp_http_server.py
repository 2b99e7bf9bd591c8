"""An operator's remote MCP server for the tests: the official SDK's `MCPServer` over streamable HTTP on
127.0.0.1, refusing every request without `Authorization: Bearer TOKEN` (401).

    python -m tests.support.mcp_http_server PORT TOKEN [--json]
"""

from __future__ import annotations

import sys

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from starlette.responses import PlainTextResponse

server = MCPServer("docs")


@server.tool()
def lookup(term: str) -> str:
    """Look a term up in the operator's documentation."""
    return f"docs: {term} is explained in chapter 7"


@server.tool()
def whoami(ctx: Context) -> str:
    """Who the caller is: a server that says back the credential it was given, as an error page may."""
    scheme, _, credential = ctx.request_context.request.headers["authorization"].partition(" ")
    return f"signed in with the {scheme.lower()} token {credential}"


@server.tool()
def dump(megabytes: int) -> str:
    """An answer of `megabytes` MB."""
    return "x" * (megabytes * 2**20)


def main() -> None:
    port, token = int(sys.argv[1]), sys.argv[2]
    app = server.streamable_http_app(json_response="--json" in sys.argv)

    async def guarded(scope, receive, send):  # type: ignore[no-untyped-def]
        headers = dict(scope.get("headers") or [])
        if scope["type"] == "http" and headers.get(b"authorization") != f"Bearer {token}".encode():
            await PlainTextResponse("no", status_code=401)(scope, receive, send)
            return
        await app(scope, receive, send)

    uvicorn.run(guarded, host="127.0.0.1", port=port, log_level="warning", lifespan="on")


if __name__ == "__main__":
    main()
