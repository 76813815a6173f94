"""Workers: the replicas of the page's own runtime (node types, load), and — when
``runtime.remote`` names a Redis — the remote workers with their heartbeats, the calls queued
and running per node type, and the newest dead letters (calls stay sealed: no input, no
principal), as ``ditto worker list`` and ``ditto worker dead-letters list`` show them."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from starlette.routing import Route

from ditto.app.ui.render import backend, page

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

__all__ = ("routes",)

_LETTERS = 50


def _when(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


async def workers(request: Request) -> Response:
    found = backend(request)
    remote = found.settings.runtime.remote
    context: dict[str, Any] = {
        "local": found.runtime.workers(),
        "remote_configured": remote.redis_url is not None,
        "remote": [],
        "pending": {},
        "letters": [],
        "letters_total": 0,
        "remote_error": None,
        "prefix": remote.prefix,
    }
    if remote.redis_url is not None:
        from ditto.app.serve.dead_letters import list_dead_letters
        from ditto.app.serve.worker import list_workers
        from ditto.errors import DittoError

        try:
            view = await list_workers(found.settings)
            letters, total = await list_dead_letters(found.settings, _LETTERS)
        except DittoError as exc:  # Redis down: the local part of the page still helps
            context["remote_error"] = f"{exc.code}: {exc.message}"
        else:
            now = time.time()
            context["remote"] = [
                {**info, "ago": max(0.0, now - info["heartbeat_at"])} for info in view["workers"]
            ]
            context["pending"] = view["pending"]
            context["letters"] = [
                {"letter": letter, "at": _when(letter.at), "deadline": _when(letter.deadline)}
                for letter in letters
            ]
            context["letters_total"] = total
    return page(request, "workers.html", **context)


routes = [Route("/workers", workers, methods=["GET"])]
