"""One record: ``GET /records/{id}`` (content, fields, provenance, validity, history as a
timeline of differences, the records that share its key), and its changes — edit, pin, archive,
forget — each confirmed on a page of its own before the ``POST`` that makes it.

The record is read with ``MEMORY.GET`` as the acting principal (so a private record of another
principal is not found); its history, only then, from the store's history log. Changes are
``MEMORY.UPDATE`` and ``MEMORY.DELETE`` calls, audited by the worker.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from starlette.routing import Route

from ditto.app.ui.diffs import timeline
from ditto.app.ui.render import acting, backend, page, redirect, refuse_when_viewing
from ditto.errors import DittoError, ErrorCode, InvalidInputError

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from ditto.app.ui.backend import Backend

__all__ = ("ACTIONS", "routes")

_EVERYTHING = ["superseded", "contested", "quarantined", "expired"]
ACTIONS: dict[str, tuple[str, dict[str, Any] | None]] = {
    "pin": ("Pin", {"pinned": True}),
    "unpin": ("Unpin", {"pinned": False}),
    "archive": ("Archive", {"archived": True}),
    "restore": ("Restore from the archive", {"archived": False}),
    "forget": ("Forget", None),
}
"""Action -> (its name, the patch it applies; ``None``: delete the record)."""
_DONE = {
    "pin": "pinned",
    "unpin": "unpinned",
    "archive": "archived",
    "restore": "restored",
    "forget": "forgotten",
}


async def load(found: Backend, record_id: str, principal: str | None) -> Any:
    """The record as ``principal`` may see it, whatever its status.

    Raises:
        DittoError: ``NOT_FOUND``.
    """
    request = {"ids": [record_id], "include": _EVERYTHING, "include_archived": True}
    items = (await found.call("MEMORY.GET", request, principal)).items
    if not items:
        who = f" to {principal}" if principal else ""
        raise DittoError(f"no record {record_id} is visible{who}", code=ErrorCode.NOT_FOUND)
    return items[0]


async def record(request: Request) -> Response:
    found = backend(request)
    principal, _ = acting(request)
    item = await load(found, request.path_params["id"], principal)
    history: list[Any] = []
    from workers.memory.ports import HistoryLog

    if isinstance(found.store, HistoryLog):
        history = await found.store.history(item.id)
    neighbours: list[Any] = []
    if item.key is not None:
        sharing = {
            "filter": {
                "namespace": item.namespace,
                "key": item.key,
                "include": _EVERYTHING,
                "archived": "include",
            },
            "limit": 50,
        }
        page_of = await found.call("MEMORY.QUERY", sharing, principal)
        neighbours = [other for other in page_of.items if other.id != item.id]
    linked = [ref for ref in (item.supersedes, item.contests) if ref]
    linked = [ref for ref in linked if ref not in {other.id for other in neighbours}]
    if linked:
        more = {"ids": linked, "include": _EVERYTHING, "include_archived": True}
        neighbours += (await found.call("MEMORY.GET", more, principal)).items
    return page(
        request,
        "record.html",
        item=item,
        steps=timeline(history),
        has_history=isinstance(found.store, HistoryLog),
        neighbours=neighbours,
        actions=ACTIONS,
    )


async def confirm(request: Request) -> Response:
    refuse_when_viewing(request)
    action = request.path_params["action"]
    if action not in ACTIONS:
        raise InvalidInputError(f"{action!r} is not something a record can do")
    item = await load(backend(request), request.path_params["id"], acting(request)[0])
    return page(request, "confirm.html", item=item, action=action, label=ACTIONS[action][0])


async def act(request: Request) -> Response:
    refuse_when_viewing(request)
    action = request.path_params["action"]
    if action not in ACTIONS:
        raise InvalidInputError(f"{action!r} is not something a record can do")
    found = backend(request)
    principal = acting(request)[0]
    record_id = request.path_params["id"]
    patch = ACTIONS[action][1]
    if patch is None:
        gone = await found.call("MEMORY.DELETE", {"ids": [record_id]}, principal)
        done = "forgotten" if gone.deleted else "already gone"
        return redirect(f"/?done={quote(f'{record_id} {done}; the audit log has the entry')}")
    form = await request.form()
    update: dict[str, Any] = {"id": record_id, **patch}
    version = str(form.get("expected_version", ""))
    if version.isdigit():
        update["expected_version"] = int(version)
    await found.call("MEMORY.UPDATE", {"updates": [update]}, principal)
    return redirect(f"/records/{quote(record_id)}?done={_DONE[action]}")


async def edit_form(request: Request) -> Response:
    refuse_when_viewing(request)
    item = await load(backend(request), request.path_params["id"], acting(request)[0])
    as_json = not isinstance(item.content, str)
    return page(request, "edit.html", item=item, as_json=as_json, errors=[])


async def edit(request: Request) -> Response:
    refuse_when_viewing(request)
    found = backend(request)
    principal = acting(request)[0]
    record_id = request.path_params["id"]
    form = await request.form()
    text = str(form.get("content", ""))
    content: Any = text
    if form.get("format") == "json":
        try:
            content = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"content is not valid JSON: {exc}") from None
    summary = str(form.get("summary", "")).strip()
    tags = [tag.strip() for tag in str(form.get("tags", "")).split(",") if tag.strip()]
    update: dict[str, Any] = {
        "id": record_id,
        "content": content,
        "summary": summary or None,
        "tags": tags,
        "category": str(form.get("category", "")).strip() or "core",
    }
    version = str(form.get("expected_version", ""))
    if version.isdigit():
        update["expected_version"] = int(version)
    await found.call("MEMORY.UPDATE", {"updates": [update]}, principal)
    return redirect(f"/records/{quote(record_id)}?done=saved")


routes = [
    Route("/records/{id}", record, name="record"),
    Route("/records/{id}/edit", edit_form, methods=["GET"]),
    Route("/records/{id}/edit", edit, methods=["POST"]),
    Route("/records/{id}/{action}", confirm, methods=["GET"]),
    Route("/records/{id}/{action}", act, methods=["POST"]),
]
