"""What every part of ``MysqlMemoryStore`` stands on: its construction, driver and lifecycle
(open and migrate, close), and transactions with their failures translated."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Self, TypeVar

from ditto.errors import ErrorCode, InvalidInputError
from ditto.extras import install_hint
from workers.memory.model.errors import MemoryStoreError
from workers.memory.model.records import Clock, utc_now
from workers.memory.retrieval.vectors import VectorIndex
from workers.memory.stores.mysql.errors import committing, error_number, mysql_errors
from workers.memory.stores.mysql.schema import migrate
from workers.memory.stores.mysql.search import DEFAULT_BUDGET
from workers.memory.stores.mysql.search_stats import SearchStatistics
from workers.memory.stores.sql_driver import SqlDriver

__all__ = ("MysqlStoreBase",)

T = TypeVar("T")

_DEADLOCK = 1213
_ATTEMPTS = 3
"""A transaction InnoDB chose as a deadlock victim was rolled back whole: run it again (at
most this many times) before reporting a retryable ``CONFLICT``."""


class MysqlStoreBase:
    """The driver, lifecycle and transactions of a MySQL memory store (the arguments are
    :class:`~workers.memory.stores.mysql.store.MysqlMemoryStore`'s)."""

    def __init__(
        self,
        driver: SqlDriver,
        *,
        clock: Clock = utc_now,
        owns_driver: bool = False,
        search_budget: int = DEFAULT_BUDGET,
    ) -> None:
        super().__init__()
        if isinstance(search_budget, bool) or not isinstance(search_budget, int):
            raise InvalidInputError("search_budget must be an integer")
        if search_budget < 1:
            raise InvalidInputError("search_budget must be at least 1")
        self.search_budget = search_budget
        self.driver = driver
        self._clock = clock
        self._owns = owns_driver
        self._opened = False
        self._open_lock = asyncio.Lock()
        self._index = VectorIndex()
        self._refreshing = asyncio.Lock()
        self._statistics = SearchStatistics()

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        pool_size: int = 10,
        clock: Clock = utc_now,
        search_budget: int = DEFAULT_BUDGET,
    ) -> Self:
        """A store over its own asyncmy pool (``mysql://user:password@host:3306/database``),
        connected on first use and closed by :meth:`aclose`.

        Raises:
            MemoryStoreError: ``STORE_UNAVAILABLE`` naming the install command when asyncmy
                (the ``mysql`` extra) is not installed.
            InvalidInputError: ``url`` is not a ``mysql://`` URL naming a database.
        """
        try:
            from workers.memory.stores.mysql.asyncmy_driver import AsyncmyDriver
        except ImportError as exc:
            if (exc.name or "").partition(".")[0] != "asyncmy":
                raise  # not the missing extra: a real bug, with its traceback
            raise MemoryStoreError(
                f"a MySQL memory store needs the mysql extra (asyncmy): {install_hint('mysql')}",
                code=ErrorCode.STORE_UNAVAILABLE,
            ) from None

        return cls(
            AsyncmyDriver(url, pool_size=pool_size),
            clock=clock,
            owns_driver=True,
            search_budget=search_budget,
        )

    # ----------------------------------------------------------------- lifecycle

    async def open(self) -> None:
        """Migrate the schema. Idempotent and safe to call concurrently."""
        if self._opened:
            return
        async with self._open_lock, mysql_errors():
            if not self._opened:
                self.cursor_secret = await migrate(self.driver)
                self._opened = True

    async def aclose(self) -> None:
        if self._owns:
            await self.driver.aclose()
        self._opened = False

    async def _ready(self) -> SqlDriver:
        if not self._opened:
            await self.open()
        return self.driver

    async def _transaction(self, change: Callable[[SqlDriver], Awaitable[T]]) -> T:
        """``change`` in one transaction, run again when InnoDB picked it as a deadlock
        victim (it was rolled back whole, so nothing of it is stored)."""
        driver = await self._ready()
        try:
            for attempt in range(1, _ATTEMPTS + 1):
                try:
                    async with mysql_errors(), committing(driver) as bound:
                        return await change(bound)
                except MemoryStoreError as exc:
                    cause = exc.__cause__
                    if attempt == _ATTEMPTS or cause is None or error_number(cause) != _DEADLOCK:
                        raise
            raise AssertionError("unreachable")  # the loop returns or raises
        finally:
            # Whatever the outcome (an unknown one may have committed): search statistics
            # cached before it no longer hold.
            self._statistics.changed()
