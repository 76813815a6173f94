"""Search and browse: ``GET /``.

With a query, one ``MEMORY.SEARCH`` with ``options.explain`` (each hit's explanation drawn as
bars, one per numeric fact, scaled to the largest among the hits) and, when ``why`` names a
record (id or key), its ``explain_miss``. Without one, ``MEMORY.QUERY`` pages through the
records, most recently created first, with the store's cursor: nothing is counted or loaded
whole.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from starlette.routing import Route

from ditto.app.ui.render import acting, backend, page
from ditto.errors import InvalidInputError

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

__all__ = ("explain_bars", "routes", "search_filter")

STRATEGIES = ("auto", "keyword", "vector", "hybrid", "recent-keyword")
LIMITS = (10, 25, 50, 100)
ARCHIVED = ("exclude", "include", "only")


def _moment(name: str, value: str, end_of_day: bool = False) -> datetime:
    """A form's date (``YYYY-MM-DD``) or local date-time (``YYYY-MM-DDTHH:MM``), read as UTC."""
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidInputError(f"{name}: {value!r} is not a date (YYYY-MM-DD)") from None
    if len(value) == 10 and end_of_day:
        moment = moment.replace(hour=23, minute=59, second=59, microsecond=999_999)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def search_filter(params: dict[str, str]) -> dict[str, Any]:
    """The ``MemoryFilter`` the form's fields describe (empty fields add nothing).

    Raises:
        InvalidInputError: A date that cannot be read, or an unknown ``archived`` mode.
    """
    found: dict[str, Any] = {}
    archived = params.get("archived") or "exclude"
    if archived not in ARCHIVED:
        raise InvalidInputError(f"archived: {archived!r} is not one of {', '.join(ARCHIVED)}")
    found["archived"] = archived
    for name in ("namespace", "category"):
        if params.get(name):
            found[name] = params[name].strip()
    tags = [tag.strip() for tag in params.get("tags", "").split(",") if tag.strip()]
    if tags:
        found["tags_any"] = tags
    if params.get("created_after"):
        found["created_after"] = _moment("created after", params["created_after"])
    if params.get("created_before"):
        found["created_before"] = _moment("created before", params["created_before"], True)
    if params.get("as_of"):
        found["as_of"] = _moment("as of", params["as_of"])
    return found


def explain_bars(hits: list[Any]) -> list[list[dict[str, Any]]]:
    """Per hit, its explanation as rows ``{name, text, bar}``: a score (a leg's, the fusion's,
    the reranker's) gets a bar, 0..1 of the largest magnitude of that score among the hits; a
    rank, a count or a word is text; a leg that did not find the hit says so (``—``)."""
    largest: dict[str, float] = {}
    for hit in hits:
        for name, value in (hit.explain or {}).items():
            if _numeric(name, value):
                largest[name] = max(largest.get(name, 0.0), abs(float(value)))
    rows = []
    for hit in hits:
        facts = []
        for name, value in (hit.explain or {}).items():
            label = name.replace("_", " ")
            if value is None:
                facts.append({"name": label, "text": "—", "bar": None})
            elif _numeric(name, value):
                top = largest[name]
                facts.append(
                    {
                        "name": label,
                        "text": f"{value:.4g}",
                        "bar": abs(float(value)) / top if top else 0.0,
                    }
                )
            else:
                facts.append({"name": label, "text": str(value), "bar": None})
        rows.append(facts)
    return rows


def _numeric(name: str, value: Any) -> bool:
    """Whether a fact is a score to draw (ranks and counts are read as numbers)."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and name.endswith(("score", "relevance"))
    )


async def search(request: Request) -> Response:
    params = dict(request.query_params)
    query = params.get("q", "").strip()
    strategy = params.get("strategy") or "auto"
    if strategy not in STRATEGIES:
        raise InvalidInputError(f"strategy: {strategy!r} is not one of {', '.join(STRATEGIES)}")
    limit = int(params["limit"]) if params.get("limit", "").isdigit() else LIMITS[0]
    limit = min(max(limit, 1), LIMITS[-1])
    filter = search_filter(params)
    principal, _ = acting(request)
    found = backend(request)
    context: dict[str, Any] = {
        "params": params,
        "query": query,
        "strategies": STRATEGIES,
        "limits": LIMITS,
        "limit": limit,
        "archived_modes": ARCHIVED,
        "hits": [],
        "bars": [],
        "miss": None,
        "items": [],
        "next_url": None,
        "paged": False,
        "vector_missing": None,
    }
    if query:
        request_body: dict[str, Any] = {
            "query": query,
            "limit": limit,
            "filter": filter,
            "options": {"explain": True},
        }
        if strategy != "auto":
            request_body["strategy"] = strategy
        why = params.get("why", "").strip()
        if why:
            request_body["explain_miss"] = {"id": why}
        output = await found.call("MEMORY.SEARCH", request_body, principal)
        miss = output.miss
        if why and miss is not None and miss.stage == "not_found":
            by_key = {**request_body, "explain_miss": {"key": why}}
            miss = (await found.call("MEMORY.SEARCH", by_key, principal)).miss
        context.update(
            hits=output.hits,
            bars=explain_bars(output.hits),
            miss=miss,
            vector_missing=output.vector_missing,
        )
    else:
        browse: dict[str, Any] = {
            "filter": filter,
            "limit": limit,
            # Created, not updated: the stores index a namespace with its creation time, so a
            # namespace's page is a range read (by updated_at it was a scan: 146 ms at 100k).
            "order_by": {"field": "created_at", "direction": "desc"},
        }
        if params.get("cursor"):
            browse["cursor"] = params["cursor"]
        output = await found.call("MEMORY.QUERY", browse, principal)
        next_url = None
        if output.next_cursor:
            kept = [(k, v) for k, v in params.items() if k != "cursor" and v]
            next_url = "/?" + urlencode([*kept, ("cursor", output.next_cursor)])
        context.update(items=output.items, next_url=next_url, paged="cursor" in params)
    return page(request, "search.html", **context)


routes = [Route("/", search, name="search")]
