"""The MCP server over streamable HTTP, guarded by a bearer token: every request without
``Authorization: Bearer <token>`` gets 401 (compared in constant time, never logged)."""

from __future__ import annotations

import hmac
import logging
from typing import TYPE_CHECKING, Any

from mcp.server.lowlevel import Server

from ditto.app.loopback import is_loopback

if TYPE_CHECKING:
    pass

__all__ = ("is_loopback", "serve_http")

logger = logging.getLogger(__name__)


class _BearerToken:
    """ASGI middleware: an HTTP request without ``Authorization: Bearer <token>`` gets 401."""

    def __init__(self, app: Any, token: str) -> None:
        self._app = app
        self._token = token.encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not self._authorised(scope):
            body = b'{"error": "unauthorized: send Authorization: Bearer <DITTO_MCP_TOKEN>"}'
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                        (b"www-authenticate", b'Bearer realm="ditto-mcp"'),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self._app(scope, receive, send)

    def _authorised(self, scope: Any) -> bool:
        given = b""
        for name, value in scope.get("headers", ()):
            if name.lower() == b"authorization":
                given = bytes(value)
                break
        scheme, _, credentials = given.partition(b" ")
        # Constant time: how much of a guess matched must not show in how long a refusal takes.
        matched = hmac.compare_digest(credentials.strip(), self._token)
        return matched and scheme.lower() == b"bearer"


async def serve_http(server: Server[Any], host: str, port: int, token: str | None = None) -> None:
    """Serve streamable HTTP at ``http://HOST:PORT/mcp`` until cancelled.

    Args:
        server: The MCP server.
        host: The address to listen on. On a loopback address the SDK refuses ``Host`` and
            ``Origin`` headers naming anything else (DNS rebinding).
        port: The port.
        token: When set, every request must carry ``Authorization: Bearer <token>`` (else 401).
            The caller requires one off loopback.
    """
    import uvicorn

    app: Any = server.streamable_http_app(host=host)
    if token:
        app = _BearerToken(app, token)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve()
