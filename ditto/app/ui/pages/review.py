"""The review queue: ``GET /review`` lists the contested and quarantined records (a cursor page
of ``MEMORY.QUERY``) with why each waits; ``POST /review`` decides one with ``MEMORY.REVIEW``
(accept: it becomes active and takes its key; reject: it is deleted, its history keeps it)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from starlette.routing import Route

from ditto.app.review_reasons import safety_kinds, waiting_for_review, why_waiting
from ditto.app.ui.render import acting, backend, page, redirect, refuse_when_viewing
from ditto.errors import InvalidInputError

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

__all__ = ("routes",)

_PAGE = 25


async def queue(request: Request) -> Response:
    found = backend(request)
    principal, _ = acting(request)
    namespace = request.query_params.get("namespace", "").strip()

    async def call(node: str, payload: dict[str, Any]) -> Any:
        return await found.call(node, payload, principal)

    cursor = request.query_params.get("cursor")
    waiting, contested = await waiting_for_review(call, namespace or None, _PAGE, cursor)
    kinds = safety_kinds(found.settings, waiting.items)
    rows = [
        {
            "item": item,
            "target": contested.get(item.contests or ""),
            "why": why_waiting(item, contested.get(item.contests or ""), kinds[item.id]),
        }
        for item in waiting.items
    ]
    next_url = None
    if waiting.next_cursor:
        kept = [("namespace", namespace)] if namespace else []
        next_url = "/review?" + urlencode([*kept, ("cursor", waiting.next_cursor)])
    return page(
        request,
        "review.html",
        rows=rows,
        namespace=namespace,
        next_url=next_url,
        paged=bool(cursor),
    )


async def decide(request: Request) -> Response:
    refuse_when_viewing(request)
    form = await request.form()
    record_id = str(form.get("id", ""))
    decision = str(form.get("decision", ""))
    if not record_id or decision not in ("accept", "reject"):
        raise InvalidInputError("a review needs a record id and accept or reject")
    verdict: dict[str, Any] = {"id": record_id, "decision": decision}
    version = str(form.get("expected_version", ""))
    if version.isdigit():
        verdict["expected_version"] = int(version)
    found = backend(request)
    output = await found.call("MEMORY.REVIEW", {"decisions": [verdict]}, acting(request)[0])
    outcome = output.items[0]
    if decision == "accept":
        done = f"accepted {record_id}: active now"
        if outcome.record.supersedes:
            done += f", {outcome.record.supersedes} kept as superseded"
    else:
        done = f"rejected {record_id}: deleted (its history keeps it)"
    return redirect(f"/review?done={quote(done)}")


routes = [
    Route("/review", queue, methods=["GET"]),
    Route("/review", decide, methods=["POST"]),
]
