"""Streamable HTTP: the SDK's app, behind a bearer token when one is set, run by uvicorn.

The SDK checks Host and Origin when bound to a loopback address, which stops
web pages from reaching the server through the browser; it does not stop
another user or process on the machine, nor anyone on the network when bound
elsewhere. ``HYBRID_RAG_HTTP_TOKEN`` locks the endpoint: every request must carry
``Authorization: Bearer <token>``; others get 401. The SDK's own auth hooks
(``TokenVerifier`` with ``AuthSettings``) model an OAuth resource server and
require an authorization server's issuer URL; a shared static token has none,
so this is a small ASGI check instead.
"""

from __future__ import annotations

import hmac
import json
from typing import TYPE_CHECKING, Any

from memory_pipeline.config import variable
from memory_pipeline.listening import Terminated, is_loopback, stop_on_sigterm

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from starlette.types import ASGIApp, Receive, Scope, Send

TOKEN_ENV_VAR = variable("http_token")
__all__ = [
    "VIEWER_PATH",
    "BearerToken",
    "Terminated",
    "WithViewer",
    "is_loopback",
    "serve_http",
    "stop_on_sigterm",
]


class BearerToken:
    """ASGI middleware: HTTP requests without ``Authorization: Bearer <token>`` get 401."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._token = token.encode()

    def allows(self, headers: list[tuple[bytes, bytes]]) -> bool:
        value = next((v for k, v in headers if k.lower() == b"authorization"), b"")
        scheme, _, given = value.partition(b" ")
        # compare_digest takes time independent of where the strings differ.
        return hmac.compare_digest(given.strip(), self._token) and scheme.lower() == b"bearer"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.allows(scope.get("headers", [])):
            await self.app(scope, receive, send)
            return
        body = json.dumps(
            {
                "error": "invalid_token",
                "error_description": f"send Authorization: Bearer <the server's {TOKEN_ENV_VAR}>",
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b'Bearer realm="hybrid-rag", error="invalid_token"'),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


#: Where ``serve --http`` serves the memory's web pages (``memory_pipeline/ui``).
VIEWER_PATH = "/ui"


class WithViewer:
    """ASGI: ``/ui`` and below to the viewer (served from there: ``root_path``), everything
    else (the MCP endpoint, the lifespan) to the MCP app. The viewer keeps its own guard
    (its token in the address, then a cookie): a browser sends no bearer token."""

    def __init__(self, mcp: ASGIApp, viewer: ASGIApp) -> None:
        self.mcp = mcp
        self.viewer = viewer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and (path == VIEWER_PATH or path.startswith(f"{VIEWER_PATH}/")):
            inner = {**scope, "root_path": scope.get("root_path", "") + VIEWER_PATH}
            if path == VIEWER_PATH:
                inner["path"] = f"{VIEWER_PATH}/"
            await self.viewer(inner, receive, send)
            return
        await self.mcp(scope, receive, send)


def serve_http(
    server: MCPServer,
    *,
    host: str,
    port: int,
    token: str | None,
    log_level: str,
    viewer: ASGIApp | None = None,
) -> None:
    """Serve ``server`` over streamable HTTP on host:port until SIGINT or SIGTERM, and
    ``viewer`` (the memory's pages) under ``/ui``."""
    # Imported here: the entry point's arguments (also ``memory-pipeline serve``'s) import
    # this module, and the command line should not load the HTTP stack to build its parser.
    import anyio
    import uvicorn

    app: Any = server.streamable_http_app(host=host)
    if token:
        app = BearerToken(app, token)
    if viewer is not None:
        app = WithViewer(app, viewer)
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level.lower())
    anyio.run(uvicorn.Server(config).serve)
