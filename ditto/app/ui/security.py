"""The page's guard, one ASGI middleware in front of every route, static files included.

- **Token**: every request carries ``DITTO_UI_TOKEN``, as the ``ditto_ui`` cookie (HttpOnly,
  SameSite=Strict) or an ``Authorization: Bearer`` header; ``?token=`` is accepted once, to set
  the cookie, and answered with a redirect to the same page without it (so it stays out of the
  history). Anything else is ``401``. Tokens are compared in constant time and never logged.
- **CSRF**: every ``POST`` carries the form field ``csrf`` (or the ``X-CSRF-Token`` header)
  equal to :func:`csrf_token` of the process's token; forms are URL-encoded, at most
  :data:`MAX_FORM_BYTES`. Otherwise ``403``.
- **Read-only**: every ``POST`` but choosing whom to view as is ``403``.
- **Headers** on every answer: a Content-Security-Policy that runs only the page's own scripts
  (no inline script, no frames, no other origin), ``X-Frame-Options: DENY``, ``nosniff``, no
  referrer, no caching.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs, parse_qsl, urlencode

__all__ = (
    "COOKIE",
    "MAX_FORM_BYTES",
    "SECURITY_HEADERS",
    "Guard",
    "csrf_token",
    "same_token",
)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Asgi = Callable[[Scope, Receive, Send], Awaitable[None]]

COOKIE = "ditto_ui"
MAX_FORM_BYTES = 1_048_576
"""Largest form body a POST may send (an edited record's content included)."""
READ_ONLY_ALLOWED = frozenset({"/view-as"})
"""POSTs that change nothing stored, allowed in read-only mode."""

SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        b"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
    (b"cross-origin-opener-policy", b"same-origin"),
)


def csrf_token(token: str) -> str:
    """The CSRF token of the process: derived from its secret, so a page that cannot read the
    cookie cannot know it."""
    return hmac.new(token.encode(), b"ditto-ui csrf", hashlib.sha256).hexdigest()


def same_token(given: str | None, expected: str) -> bool:
    """Constant-time comparison (a missing value never matches)."""
    if not given:
        return False
    return hmac.compare_digest(given.encode(), expected.encode())


class Guard:
    """The middleware (see the module): token, CSRF, read-only and headers."""

    def __init__(self, app: Asgi, *, token: str, read_only: bool) -> None:
        self.app = app
        self.token = token
        self.csrf = csrf_token(token)
        self.read_only = read_only

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        send = _with_headers(send)
        headers = _headers(scope)
        query = scope.get("query_string", b"").decode("latin-1")
        offered = parse_qs(query).get("token", [None])[0]
        if offered is not None:
            await self._token_in_url(scope, query, offered, send)
            return
        if not self._authenticated(headers):
            await _plain(send, 401, _UNAUTHORIZED, [(b"www-authenticate", b"Bearer")])
            return
        if scope["method"] in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        if scope["method"] != "POST":
            await _plain(send, 405, "only GET and POST are served")
            return
        if self.read_only and scope["path"] not in READ_ONLY_ALLOWED:
            await _plain(
                send, 403, "this page is read-only (ditto ui --read-only): nothing changes"
            )
            return
        await self._post(scope, receive, send, headers)

    async def _token_in_url(self, scope: Scope, query: str, offered: str, send: Send) -> None:
        if not same_token(offered, self.token):
            await _plain(send, 401, _UNAUTHORIZED)
            return
        rest = urlencode(
            [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k != "token"]
        )
        # One leading slash: ``//host/...`` would send the browser to another site.
        path = "/" + (scope.get("root_path", "") + scope["path"]).lstrip("/")
        target = path + (f"?{rest}" if rest else "")
        cookie = f"{COOKIE}={self.token}; HttpOnly; SameSite=Strict; Path=/"
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [(b"location", target.encode()), (b"set-cookie", cookie.encode())],
            }
        )
        await send({"type": "http.response.body", "body": b""})

    def _authenticated(self, headers: dict[bytes, bytes]) -> bool:
        authorization = headers.get(b"authorization", b"").decode("latin-1")
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() == "bearer" and same_token(value.strip(), self.token):
            return True
        cookies = SimpleCookie()
        try:
            cookies.load(headers.get(b"cookie", b"").decode("latin-1"))
        except Exception:  # a malformed cookie header is no credential
            return False
        morsel = cookies.get(COOKIE)
        return morsel is not None and same_token(morsel.value, self.token)

    async def _post(
        self, scope: Scope, receive: Receive, send: Send, headers: dict[bytes, bytes]
    ) -> None:
        kind = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
        if kind not in (b"application/x-www-form-urlencoded", b""):
            await _plain(send, 415, "changes are sent as URL-encoded forms")
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > MAX_FORM_BYTES:
                await _plain(send, 413, "the form is too large")
                return
            if not message.get("more_body", False):
                break
        sent = (
            headers.get(b"x-csrf-token", b"").decode("latin-1")
            or (parse_qs(body.decode("utf-8", "replace")).get("csrf", [None])[0])
        )
        if not same_token(sent, self.csrf):
            await _plain(
                send, 403, "refused: the form has no valid CSRF token (reload the page and retry)"
            )
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        await self.app(scope, replay, send)


_UNAUTHORIZED = (
    "401: this page needs its token. Open the address `ditto ui` printed when it started "
    "(it ends in ?token=...), or send Authorization: Bearer <DITTO_UI_TOKEN>."
)


def _headers(scope: Scope) -> dict[bytes, bytes]:
    return {name.lower(): value for name, value in scope.get("headers", [])}


def _with_headers(send: Send) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            names = {name.lower() for name, _ in message.get("headers", [])}
            extra = [(name, value) for name, value in SECURITY_HEADERS if name not in names]
            message["headers"] = [*message.get("headers", []), *extra]
        await send(message)

    return sending


async def _plain(
    send: Send, status: int, text: str, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = text.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
