"""The audit log and retention, read and run on the store itself (as ``ditto memory audit``
and ``ditto memory hygiene`` do).

``GET /audit``: a page of entries after a sequence number, for one principal (in the store) and
one node or decision (on the page read). ``GET /hygiene``: the retention rules; with
``preview=1``, the dry run of what hygiene would archive, purge and delete; ``POST /hygiene``
runs it and appends an audit entry (``MEMORY.HYGIENE``) naming who ran it and what it touched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from starlette.routing import Route

from ditto.app.ui.render import acting, backend, page, redirect, refuse_when_viewing

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

__all__ = ("HYGIENE_NODE", "routes")

HYGIENE_NODE = "MEMORY.HYGIENE"
"""The node name of the audit entry a hygiene run from the page leaves."""
DECISIONS = ("allow", "deny", "would-deny", "failed")
_LIMITS = (20, 100, 500)
_SHOWN = 20


async def audit(request: Request) -> Response:
    from workers.memory.ports import AuditLog

    found = backend(request)
    log = found.capability(AuditLog, "audit log")
    params = request.query_params
    after = int(params["after"]) if params.get("after", "").isdigit() else 0
    limit = int(params["limit"]) if params.get("limit", "") in {str(n) for n in _LIMITS} else 100
    principal = params.get("principal", "").strip() or None
    node = params.get("node", "").strip().upper()
    decision = params.get("decision", "")
    entries = await log.audit_log(after=after, limit=limit, principal=principal)
    shown = [
        entry
        for entry in entries
        if (not node or entry.node == node) and (not decision or entry.decision == decision)
    ]
    next_url = None
    if len(entries) == limit:
        kept = [(k, v) for k, v in params.items() if k != "after" and v]
        next_url = "/audit?" + urlencode([*kept, ("after", str(entries[-1].seq))])
    return page(
        request,
        "audit.html",
        entries=shown,
        read=len(entries),
        params=dict(params),
        decisions=DECISIONS,
        limits=_LIMITS,
        limit=limit,
        next_url=next_url,
        audit_on=found.settings.workers.memory.audit,
    )


async def hygiene(request: Request) -> Response:
    from ditto.app.bootstrap import build_retention
    from workers.memory import run_hygiene

    found = backend(request)
    policy = build_retention(found.settings)
    report = None
    if request.query_params.get("preview"):
        report = await run_hygiene(found.store, policy, dry_run=True)
    return page(
        request,
        "hygiene.html",
        rules=policy.categories,
        audit_days=policy.audit_days,
        report=report,
        shown=_SHOWN,
    )


async def run(request: Request) -> Response:
    from ditto.app.bootstrap import build_retention
    from workers.memory import run_hygiene
    from workers.memory.model.records import utc_now
    from workers.memory.ports import AuditEvent, AuditLog

    refuse_when_viewing(request)
    found = backend(request)
    report = await run_hygiene(found.store, build_retention(found.settings), dry_run=False)
    touched: list[Any] = [*report.archived, *report.purged, *report.expired]
    summary = (
        f"archived {len(report.archived)}, purged {len(report.purged)}, deleted "
        f"{len(report.expired)} expired, trimmed {report.audit_purged} audit entries"
    )
    if isinstance(found.store, AuditLog):
        event = AuditEvent(utc_now(), acting(request)[0], HYGIENE_NODE, touched, "allow", summary)
        await found.store.append_audit([event])
    return redirect(f"/hygiene?done={quote('hygiene ' + summary)}")


routes = [
    Route("/audit", audit, methods=["GET"]),
    Route("/hygiene", hygiene, methods=["GET"]),
    Route("/hygiene", run, methods=["POST"]),
]
