"""The one driver-error boundary: :class:`map_exceptions` (httpcore's shape) and
:func:`translate`, each given a table from driver exception classes to the
:class:`~ditto.errors.DittoError` to raise. Adapters keep their tables; this module imports no
driver."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

from ditto.errors.core import DittoError

__all__ = ("ExceptionMapping", "map_exceptions", "translate")


ExceptionMapping: TypeAlias = Mapping[
    type[BaseException] | tuple[type[BaseException], ...], Callable[[Any], DittoError | None]
]
"""A boundary's table: driver exception class (or tuple) -> factory of the :class:`DittoError` to
raise. The factory gets the exception (to read an SQLite result code, a SQLSTATE) and may return
``None`` to let it through unchanged. The first matching key wins: put a subclass first."""


def translate(exc: BaseException, table: ExceptionMapping) -> DittoError | None:
    """The error ``table`` maps ``exc`` to, ``exc`` set as its ``__cause__``; ``None`` when no key
    matches or the factory lets it through. For a failure handed on rather than raised (to
    another task's future, say); a block uses :class:`map_exceptions`."""
    for kinds, factory in table.items():
        if isinstance(exc, kinds):
            error = factory(exc)
            if error is not None:
                error.__cause__ = exc
            return error
    return None


class map_exceptions:  # lower case: it reads as a function, ``with map_exceptions(TABLE):``
    """A driver-error boundary (httpcore's ``map_exceptions``): an exception raised in the block
    that ``table`` maps is raised as its :class:`DittoError` ``from`` the driver's exception (the
    log keeps the cause); anything else passes through untouched.

    ``with`` or ``async with``; stateless, so one instance may be kept and entered concurrently.
    Not ``@contextmanager``: every store call enters one, and a generator costs ~5x per use.

    Args:
        table: Exception classes to factories (see :data:`ExceptionMapping`). Messages the
            factories build are shown to end users: never a URL, a password or a driver's text.
    """

    __slots__ = ("table",)

    def __init__(self, table: ExceptionMapping) -> None:
        self.table = table

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, trace: object
    ) -> None:
        if exc is not None:
            error = translate(exc, self.table)
            if error is not None:
                raise error from exc

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, trace: object
    ) -> None:
        self.__exit__(kind, exc, trace)
