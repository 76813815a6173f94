"""The ASGI app of ``ditto ui``: the pages' routes, the static files, the guard in front of
them all (:mod:`~ditto.app.ui.security`) and the backend opened for the app's lifetime."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.resources import files
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles

from ditto.app.ui.backend import UiOptions, open_backend
from ditto.app.ui.pages import governance, record, review, runs, search, view_as, workers
from ditto.app.ui.render import failure
from ditto.app.ui.security import Guard
from ditto.errors import DittoError

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ("create_app",)


def _static() -> Path:
    from pathlib import Path

    return Path(str(files("ditto.app.ui") / "static"))


def create_app(options: UiOptions) -> Starlette:
    """The page over the store ``options.settings`` configure (opened when the app starts)."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with open_backend(options) as backend:
            app.state.backend = backend
            yield

    routes: list[BaseRoute] = [
        *search.routes,
        *record.routes,
        *review.routes,
        *view_as.routes,
        *governance.routes,
        *runs.routes,
        *workers.routes,
        Mount("/static", StaticFiles(directory=_static()), name="static"),
    ]
    return Starlette(
        routes=routes,
        middleware=[Middleware(Guard, token=options.token, read_only=options.read_only)],
        exception_handlers={DittoError: failure},
        lifespan=lifespan,
    )
