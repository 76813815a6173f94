"""View as: the operator (who holds the token, so an administrator) browses as another
principal and sees exactly what that principal's tools would see — every read is a node call
made as that principal, filtered by access control inside the store. Changes are off meanwhile.
The choice is a cookie of this browser (HttpOnly, SameSite=Strict), set and cleared by ``POST``
(read-only mode allows it: it changes nothing stored)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.routing import Route

from ditto.app.ui.render import VIEW_AS_COOKIE, backend, page, redirect
from ditto.errors import InvalidInputError

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

__all__ = ("routes",)

_SUGGESTIONS_FROM = 1000
"""Audit entries read for the principals the form suggests."""


async def view_as_form(request: Request) -> Response:
    from workers.memory.ports import AuditLog

    found = backend(request)
    known: set[str] = set()
    if isinstance(found.store, AuditLog):
        entries = await found.store.audit_log(after=0, limit=_SUGGESTIONS_FROM)
        known = {entry.principal for entry in entries if entry.principal}
    return page(request, "view_as.html", known=sorted(known))


async def view_as(request: Request) -> Response:
    form = await request.form()
    answer = redirect("/")
    if form.get("stop"):
        answer.delete_cookie(VIEW_AS_COOKIE, path="/")
        return answer
    principal = str(form.get("principal", "")).strip()
    if not principal or len(principal) > 256 or not principal.isprintable():
        raise InvalidInputError("name the principal to view as (1 to 256 printable characters)")
    answer.set_cookie(VIEW_AS_COOKIE, principal, httponly=True, samesite="strict", path="/")
    return answer


routes = [
    Route("/view-as", view_as_form, methods=["GET"]),
    Route("/view-as", view_as, methods=["POST"]),
]
