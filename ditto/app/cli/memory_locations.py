"""Naming a memory store on the command line (``ditto memory copy SRC DST``, ``verify A B``).

A location is one of::

    sqlite:///absolute/memory.sqlite    sqlite:relative/memory.sqlite    sqlite:~/memory.sqlite
    markdown:///absolute/folder         markdown:relative/folder
    postgresql://user:password@host:5432/database?schema=ditto   (postgres:// too)
    mysql://user:password@host:3306/database                     (mariadb:// too)
    config:ditto.yaml                   config: ($DITTO_CONFIG or ./ditto.yaml)

Each becomes the :class:`Settings` of that one store, so the store is built exactly as the
runtime would build it (``build_memory_store``). A location is shown by its :attr:`label`,
which never holds a password (nor a user name): the URL itself is never printed, not even in
the message saying it is malformed.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from pydantic import SecretStr, ValidationError

from ditto.app.config import Settings, load_config, redact_url, resolve_config_path
from ditto.app.memory_setup import location_path
from ditto.app.urls import split_schema
from ditto.errors import DittoError, InvalidInputError

__all__ = (
    "FORMS",
    "LocationError",
    "StoreLocation",
    "locations_or_exit",
    "on_stores",
    "parse_location",
)

T = TypeVar("T")

FORMS = "sqlite:PATH, markdown:PATH, postgresql://…[?schema=NAME], mysql://…, or config:[FILE]"
"""The accepted forms, for messages and help."""

_POSTGRES = ("postgresql", "postgres")
_DEFAULT_PORTS = {"postgres": "5432", "mysql": "3306"}
_MYSQL = ("mysql", "mariadb")


class LocationError(Exception):
    """A location that names no store (the message never quotes a URL)."""


@dataclass(frozen=True, slots=True)
class StoreLocation:
    """A store named on the command line."""

    label: str
    """How messages name it: paths made absolute, URLs without user, password or query."""
    settings: Settings
    """Settings whose ``workers.memory`` describe this store (the rest: defaults, or the
    configuration file's for ``config:``)."""
    identity: tuple[str, ...]
    """What two locations of the same store share (two copies of it refuse to run)."""


def parse_location(text: str, role: str) -> StoreLocation:
    """The store ``text`` names.

    Args:
        text: One of the forms in the module docstring.
        role: ``"SRC"``, ``"DST"``, ... for the message.

    Raises:
        LocationError: Not one of the forms, a malformed URL (never quoted), or a
            configuration naming the in-process store.
        ConfigError: ``config:`` naming a configuration that does not load.
    """
    scheme, colon, rest = text.partition(":")
    scheme = scheme.lower()
    handler = _HANDLERS.get(scheme) if colon else None
    if handler is None:
        shown = scheme if colon and "/" not in scheme and len(scheme) < 20 else None
        what = f"unknown kind of store {shown!r}" if shown else "not a store location"
        raise LocationError(f"{role}: {what}: use {FORMS}")
    return handler(text, rest, role)


def _path(rest: str, role: str, scheme: str) -> Path:
    try:
        return location_path(rest, scheme).absolute()
    except InvalidInputError as exc:
        raise LocationError(f"{role}: {exc.message}") from None


def _memory(role: str, **values: Any) -> Settings:
    try:
        return Settings.model_validate({"workers": {"memory": values}})
    except ValidationError:  # pydantic's message names an environment variable, not SRC
        kind = values["backend"]
        hint = "" if kind in ("sqlite", "markdown") else _ENCODE_HINT
        raise LocationError(f"{role}: not a valid {_EXAMPLES[kind]}{hint}") from None


_ENCODE_HINT = "; percent-encode a '/', '?', '#' or '@' in the user name or password"
_EXAMPLES = {
    "sqlite": "SQLite path",
    "markdown": "Markdown folder",
    "postgres": "PostgreSQL URL (postgresql://user:password@host:5432/database?schema=NAME)",
    "mysql": "MySQL URL (mysql://user:password@host:3306/database)",
}


def _sqlite(text: str, rest: str, role: str) -> StoreLocation:
    path = _path(rest, role, "sqlite")
    settings = _memory(role, backend="sqlite", sqlite_path=str(path))
    return StoreLocation(f"sqlite://{path}", settings, ("sqlite", str(path.resolve())))


def _markdown(text: str, rest: str, role: str) -> StoreLocation:
    folder = _path(rest, role, "markdown")
    settings = _memory(role, backend="markdown", markdown_path=str(folder))
    return StoreLocation(f"markdown://{folder}", settings, ("markdown", str(folder.resolve())))


def _postgres(text: str, rest: str, role: str) -> StoreLocation:
    url, schema = _take_schema(text, role)
    values: dict[str, Any] = {"backend": "postgres", "postgres_url": SecretStr(url)}
    if schema is not None:
        values["postgres_schema"] = schema
    return _server(_memory(role, **values), role)


def _mysql(text: str, rest: str, role: str) -> StoreLocation:
    return _server(_memory(role, backend="mysql", mysql_url=SecretStr(text)), role)


def _config(text: str, rest: str, role: str) -> StoreLocation:
    path = Path(rest).expanduser() if rest else None
    if path is not None and not path.is_file():
        raise LocationError(f"{role}: no configuration file {path}")
    settings = load_config(path)
    inner = _of_settings(settings, role)
    source = resolve_config_path(path, os.environ)
    name = "defaults" if source is None else str(source)
    return StoreLocation(f"config:{name} ({inner.label})", settings, inner.identity)


def _of_settings(settings: Settings, role: str) -> StoreLocation:
    memory = settings.workers.memory
    if memory.backend == "inprocess":
        raise LocationError(f"{role}: the configuration's store is in-process (it holds nothing)")
    if memory.backend in ("postgres", "mysql"):
        return _server(settings, role)
    path = (memory.sqlite_file if memory.backend == "sqlite" else memory.markdown_folder).absolute()
    return StoreLocation(
        f"{memory.backend}://{path}", settings, (memory.backend, str(path.resolve()))
    )


def _server(settings: Settings, role: str) -> StoreLocation:
    memory = settings.workers.memory
    secret = memory.postgres_url if memory.backend == "postgres" else memory.mysql_url
    assert secret is not None  # the settings refuse a server backend without its URL
    label = redact_url(secret) or ""
    parts = urlsplit(secret.get_secret_value())
    try:
        port = str(parts.port or "")
    except ValueError:
        raise LocationError(f"{role}: not a valid {_EXAMPLES[memory.backend]}") from None
    port = port or _DEFAULT_PORTS[memory.backend]
    identity = [memory.backend, (parts.hostname or "").lower(), port, parts.path.strip("/")]
    if memory.backend == "postgres":
        label += f" (schema {memory.postgres_schema})"
        identity.append(memory.postgres_schema)
    return StoreLocation(label, settings, tuple(identity))


def _take_schema(url: str, role: str) -> tuple[str, str | None]:
    """``url`` without its ``schema`` query parameter, and that parameter."""
    try:
        return split_schema(url)
    except ValueError as exc:
        if str(exc) == "not a valid URL":
            raise LocationError(f"{role}: not a valid {_EXAMPLES['postgres']}") from None
        raise LocationError(f"{role}: {exc}") from None


_HANDLERS: dict[str, Callable[[str, str, str], StoreLocation]] = {
    "sqlite": _sqlite,
    "markdown": _markdown,
    **dict.fromkeys(_POSTGRES, _postgres),
    **dict.fromkeys(_MYSQL, _mysql),
    "config": _config,
}


def locations_or_exit(*named: tuple[str, str]) -> list[StoreLocation]:
    """Each ``(text, role)`` parsed, or a usage error (exit 2) naming the role; two that name
    the same store are refused."""
    from ditto.app.cli.output import config_error, fail_usage
    from ditto.errors import ConfigError

    locations: list[StoreLocation] = []
    for text, role in named:
        try:
            locations.append(parse_location(text, role))
        except LocationError as exc:
            fail_usage(str(exc))
        except ConfigError as exc:
            config_error(exc)
    for index, location in enumerate(locations):
        for other, (_, role) in zip(locations[:index], named, strict=False):
            if other.identity == location.identity:
                fail_usage(f"{role} and {named[index][1]} are the same store: {location.label}")
    return locations


def on_stores(
    opened: Sequence[tuple[StoreLocation, bool]],
    work: Callable[..., Awaitable[T]],
) -> T:
    """Open each store (``existing``: never create it, as a reader; see
    ``build_memory_store``), run ``work(*stores)`` and close them. A store that cannot be
    opened exits naming it by its label; a failure meanwhile exits coded (3 for a store, 2
    for usage) and never with a traceback."""
    import anyio

    from ditto.app.bootstrap import build_memory_store
    from ditto.app.cli.memory_common import fail

    async def run() -> T:
        async with AsyncExitStack() as stack:
            stores = []
            for location, existing in opened:
                try:
                    store = build_memory_store(location.settings, existing=existing)
                    stores.append(await stack.enter_async_context(store))
                except DittoError as exc:
                    raise DittoError(f"{location.label}: {exc.message}", code=exc.code) from exc
            return await work(*stores)

    try:
        return anyio.run(run)
    except DittoError as exc:
        fail(exc.code, exc.message)
