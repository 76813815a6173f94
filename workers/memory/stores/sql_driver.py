"""The SQL driver port: what a SQL memory store needs from a database driver, and no more.

A store's SQL is written once with the neutral ``?`` marker; :func:`convert` rewrites it into
the driver's own placeholder style (``qmark`` ``?``, ``format`` ``%s``, ``numeric`` ``$1``).
Values always travel as parameters, never spliced into SQL, and the store never runs SQL that
a model wrote.

Bring your own driver by implementing :class:`SqlDriver` (four methods and one attribute): the
MySQL store ships one over asyncmy (``workers.memory.stores.mysql.asyncmy_driver``); the tests
plug a second over PyMySQL run in a worker thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from enum import StrEnum
from functools import lru_cache
from typing import Any, Protocol, runtime_checkable

__all__ = ("Placeholder", "SqlDriver", "convert", "fetch", "run")


class Placeholder(StrEnum):
    """How a driver marks a parameter in SQL (PEP 249's ``paramstyle`` names)."""

    QMARK = "qmark"
    """``?`` (sqlite3, mysqlclient with a ``?`` converter)."""
    FORMAT = "format"
    """``%s`` (PyMySQL, asyncmy, aiomysql, mysqlclient, psycopg); a literal ``%`` is ``%%``."""
    NUMERIC = "numeric"
    """``$1``, ``$2`` ... (asyncpg)."""


@runtime_checkable
class SqlDriver(Protocol):
    """A database driver as a SQL store uses it.

    Guarantees a store relies on:

    * ``rows`` and ``execute`` outside :meth:`transaction` run in autocommit, each on some
      connection of the driver (a pool may hand out any).
    * :meth:`transaction` yields a driver bound to ONE connection: every statement through it
      runs in one transaction, committed when the block ends and rolled back when it raises
      (or is cancelled). Nested calls on the bound driver are not supported.
    * Connections run at ``READ COMMITTED`` (the MySQL store's locking assumes no gap locks)
      with ``utf8mb4`` text.
    * Failures are the driver's own DB-API exceptions (``args[0]`` the server's error number,
      as PyMySQL, asyncmy, aiomysql and mysqlclient all raise them) or ``OSError``: the
      store's one error boundary translates them. A lost connection while ``COMMIT`` is on the
      wire must raise (the store reports ``OUTCOME_UNKNOWN``).
    """

    placeholder: Placeholder
    """The marker style this driver's SQL uses."""

    async def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run a statement that returns rows.

        Args:
            sql: One statement in the driver's placeholder style.
            params: Its values, in marker order.

        Returns:
            Every row, as tuples in select order.
        """
        ...

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run a statement that returns no rows.

        Returns:
            The number of rows it changed (as the server counts them).
        """
        ...

    def transaction(self) -> AbstractAsyncContextManager[SqlDriver]:
        """One transaction on one connection, as a driver bound to it (see the class)."""
        ...

    async def aclose(self) -> None:
        """Close the driver's connections (a store closes only drivers it built)."""
        ...


def convert(sql: str, style: Placeholder) -> str:
    """``sql`` written with ``?`` markers, in ``style``.

    Markers inside quoted literals (``'...'``, ``"..."``, backticks) are left alone, and in
    the ``format`` style a literal ``%`` becomes ``%%`` (the driver formats the string).
    """
    if style is Placeholder.QMARK:
        return sql
    out: list[str] = []
    quote: str | None = None
    number = 0
    for char in sql:
        if quote is not None:
            if char == quote:
                quote = None
        elif char in "'\"`":
            quote = char
        elif char == "?":
            number += 1
            out.append("%s" if style is Placeholder.FORMAT else f"${number}")
            continue
        out.append("%%" if char == "%" and style is Placeholder.FORMAT else char)
    return "".join(out)


@lru_cache(maxsize=1024)
def _converted(sql: str, style: Placeholder) -> str:
    return convert(sql, style)


async def fetch(driver: SqlDriver, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """``driver.rows`` of ``sql`` written with ``?`` markers (converted once per statement)."""
    return await driver.rows(_converted(sql, driver.placeholder), params)


async def run(driver: SqlDriver, sql: str, params: Sequence[Any] = ()) -> int:
    """``driver.execute`` of ``sql`` written with ``?`` markers (converted once per statement)."""
    return await driver.execute(_converted(sql, driver.placeholder), params)
