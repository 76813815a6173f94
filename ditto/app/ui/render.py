"""Rendering pages: one Jinja2 environment with autoescape on for every template (record text
is untrusted and is never marked safe), what every page's layout needs, and error pages that
say what to do."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import TYPE_CHECKING, Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from starlette.responses import HTMLResponse, RedirectResponse

from ditto.app.ui.security import csrf_token
from ditto.errors import DittoError, ErrorCode

if TYPE_CHECKING:
    from starlette.requests import Request

    from ditto.app.ui.backend import Backend

__all__ = (
    "VIEW_AS_COOKIE",
    "acting",
    "backend",
    "changes_allowed",
    "content_text",
    "failure",
    "page",
    "redirect",
    "refuse_when_viewing",
)

VIEW_AS_COOKIE = "ditto_ui_as"
_NAME = re.compile(r"^[^\x00-\x1f\x7f]{1,256}$")

_STATUS: dict[str, int] = {
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.CHECKPOINT_NOT_FOUND: 404,
    ErrorCode.FORBIDDEN: 403,
    ErrorCode.CONFLICT: 409,
    ErrorCode.INVALID_INPUT: 400,
    ErrorCode.UNSUPPORTED: 501,
}
_HINTS: dict[str, str] = {
    ErrorCode.NOT_FOUND: "It may have been forgotten, or be private to another principal.",
    ErrorCode.FORBIDDEN: "Access control refused it: view as a principal that may, or ask "
    "the record's owner.",
    ErrorCode.CONFLICT: "The record changed since this page was loaded: open it again and "
    "redo the change.",
    ErrorCode.INVALID_INPUT: "Correct the highlighted field and submit again.",
    ErrorCode.STORE_UNAVAILABLE: "The store cannot be reached: check it and reload.",
    ErrorCode.UNSUPPORTED: "This store does not keep it; ditto.yaml chooses the store.",
}


def _when(value: datetime | None) -> str:
    return "—" if value is None else value.strftime("%Y-%m-%d %H:%M:%S UTC")


def content_text(content: Any) -> str:
    """A record's content as text to show: a string as it is, anything else as indented JSON."""
    if isinstance(content, str):
        return content
    return json.dumps(content, indent=2, ensure_ascii=False, sort_keys=True)


_ENV = Environment(
    loader=PackageLoader("ditto.app.ui", "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
_ENV.filters["when"] = _when
_ENV.filters["content_text"] = content_text


def backend(request: Request) -> Backend:
    found: Backend = request.app.state.backend
    return found


def acting(request: Request) -> tuple[str | None, str | None]:
    """Who the page acts as for this request, and whom the operator views as (or ``None``)."""
    viewing = request.cookies.get(VIEW_AS_COOKIE)
    if viewing is not None and not _NAME.match(viewing):
        viewing = None
    principal = backend(request).options.principal
    return (viewing if viewing is not None else principal), viewing


def changes_allowed(request: Request) -> bool:
    """Whether this page may offer changes: not read-only, not viewing as another principal."""
    return not backend(request).options.read_only and acting(request)[1] is None


def refuse_when_viewing(request: Request) -> None:
    """Raise ``FORBIDDEN`` for a change while viewing as another principal.

    Raises:
        DittoError: ``FORBIDDEN``.
    """
    viewing = acting(request)[1]
    if viewing is not None:
        raise DittoError(
            f"viewing as {viewing} is for looking: stop viewing as {viewing} to make changes",
            code=ErrorCode.FORBIDDEN,
        )


def page(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
    """``template`` rendered with the layout's context (the CSRF token, read-only, who acts)."""
    found = backend(request)
    principal, viewing = acting(request)
    memory = found.settings.workers.memory
    layout = {
        "request_path": request.url.path,
        "csrf": csrf_token(found.options.token),
        "read_only": found.options.read_only,
        "changes": changes_allowed(request),
        "principal": principal,
        "viewing": viewing,
        "acl": memory.acl.mode,
        "done": request.query_params.get("done"),
    }
    html = _ENV.get_template(template).render(**layout, **context)
    return HTMLResponse(html, status_code=status)


def redirect(url: str) -> RedirectResponse:
    """After a change: see the result with a GET (reloading never repeats the change)."""
    return RedirectResponse(url, status_code=303)


async def failure(request: Request, exc: Exception) -> HTMLResponse:
    """A coded error as a page that says what happened and what to do."""
    assert isinstance(exc, DittoError)
    return page(
        request,
        "error.html",
        _STATUS.get(exc.code, 503 if exc.code.endswith("UNAVAILABLE") else 500),
        code=exc.code,
        message=exc.message,
        hint=_HINTS.get(exc.code, ""),
    )
