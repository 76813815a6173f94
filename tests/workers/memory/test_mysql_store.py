"""What only the MySQL store promises: safe failures, one migration, its error boundary."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from uuid import uuid4

import anyio
import pytest

from ditto import InvalidInputError, create_ditto
from ditto.errors import translate
from tests.services import MysqlSpace, mysql_execute
from workers.memory import MemoryStoreError, create_memory_worker
from workers.memory.stores.sql_driver import SqlDriver

pytestmark = [pytest.mark.anyio, pytest.mark.mysql]

asyncmy = pytest.importorskip("asyncmy", reason="MySQL tests need asyncmy")

from workers.memory.stores.mysql import MysqlMemoryStore  # noqa: E402
from workers.memory.stores.mysql.asyncmy_driver import AsyncmyDriver, MysqlUrl  # noqa: E402
from workers.memory.stores.mysql.errors import MYSQL_ERRORS  # noqa: E402


@pytest.mark.parametrize(
    ("number", "code", "retryable"),
    [
        (1213, "CONFLICT", True),  # deadlock: InnoDB rolled the transaction back
        (1205, "STORE_TIMEOUT", True),  # lock wait timeout
        (1969, "STORE_TIMEOUT", True),  # MariaDB max_statement_time
        (2013, "STORE_UNAVAILABLE", True),  # lost connection
        (1045, "STORE_UNAVAILABLE", False),  # access denied
        (1290, "STORE_READ_ONLY", False),
    ],
)
def test_the_boundary_maps_server_error_numbers(number: int, code: str, retryable: bool) -> None:
    exc = asyncmy.errors.OperationalError(number, "secret text from the server: hunter2")
    error = translate(exc, MYSQL_ERRORS)
    assert error is not None
    assert (error.code, error.retryable) == (code, retryable)
    assert "hunter2" not in error.message
    assert error.__cause__ is exc


def test_a_bug_of_ours_passes_through_the_boundary() -> None:
    assert translate(asyncmy.errors.ProgrammingError(1064, "syntax"), MYSQL_ERRORS) is None
    assert translate(KeyError(1213), MYSQL_ERRORS) is None  # not a driver error


def test_a_url_that_is_not_mysql_is_refused_without_echoing_it() -> None:
    with pytest.raises(InvalidInputError) as raised:
        MysqlMemoryStore.from_url("postgresql://admin:hunter2@db/x")
    assert "hunter2" not in str(raised.value)
    assert "hunter2" not in repr(MysqlUrl.parse("mysql://admin:hunter2@db/x"))


async def test_an_unreachable_server_is_store_unavailable_without_the_url() -> None:
    store = MysqlMemoryStore.from_url("mysql://admin:hunter2@127.0.0.1:1/nowhere")
    async with create_ditto(workers=[create_memory_worker(store)]) as runtime:
        result = await runtime.invoke("MEMORY.QUERY", {})
    await store.aclose()
    assert result.error is not None
    assert (result.error.code, result.error.retryable) == ("STORE_UNAVAILABLE", True)
    for secret in ("hunter2", "admin", "127.0.0.1", "nowhere"):
        assert secret not in result.error.message


@pytest.mark.parametrize("wrong", ["user", "database"])
async def test_a_wrong_user_or_database_is_a_clean_non_retryable_error(
    mysql_space: MysqlSpace, wrong: str
) -> None:
    parts = MysqlUrl.parse(mysql_space.url)
    host = f"{parts.host}:{parts.port}"
    if wrong == "user":
        url = f"mysql://no_such_user_{uuid4().hex[:8]}:pw@{host}/{parts.database}"
    else:
        url = f"mysql://{parts.user}@{host}/no_such_db_{uuid4().hex[:8]}"
    store = MysqlMemoryStore.from_url(url)
    try:
        async with create_ditto(workers=[create_memory_worker(store)]) as runtime:
            result = await runtime.invoke("MEMORY.QUERY", {})
    finally:
        await store.aclose()
    assert result.error is not None
    assert (result.error.code, result.error.retryable) == ("STORE_UNAVAILABLE", False)
    for part in ("no_such", "pw", host):
        assert part not in result.error.message


async def test_a_schema_from_a_newer_version_is_refused(mysql_space: MysqlSpace) -> None:
    async with MysqlMemoryStore.from_url(mysql_space.url):
        pass
    mysql_execute(
        mysql_space.url,
        f"UPDATE `{mysql_space.database}`.ditto_meta SET value = '99' "
        "WHERE name = 'schema_version'",
    )
    store = MysqlMemoryStore.from_url(mysql_space.url)
    with pytest.raises(MemoryStoreError, match="Upgrade Ditto") as raised:
        await store.open()
    assert raised.value.code == "STORE_CORRUPT"
    await store.aclose()


async def test_two_stores_opening_at_once_migrate_once(mysql_space: MysqlSpace) -> None:
    stores = [MysqlMemoryStore.from_url(mysql_space.url, pool_size=2) for _ in range(4)]
    async with anyio.create_task_group() as group:
        for store in stores:
            group.start_soon(store.open)
    secrets = {store.cursor_secret for store in stores}
    for store in stores:
        await store.aclose()
    assert len(secrets) == 1  # one migration created the signing key; all read the same


class _KilledAtCommit(AsyncmyDriver):
    """asyncmy, with the server killing the transaction's connection as ``COMMIT`` goes out
    (a real fault: ``KILL`` from a second connection)."""

    def __init__(self, url: str) -> None:
        super().__init__(url, pool_size=2)
        self.killer = AsyncmyDriver(url, pool_size=1)
        self.armed = False

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[SqlDriver]:
        async with super().transaction() as bound:
            yield bound
            if not self.armed:
                return
            ((connection_id,),) = await bound.rows("SELECT CONNECTION_ID()")
            await self.killer.execute(f"KILL {int(connection_id)}")

    async def aclose(self) -> None:
        await self.killer.aclose()
        await super().aclose()


async def test_a_connection_lost_during_commit_is_outcome_unknown_never_retryable(
    mysql_space: MysqlSpace,
) -> None:
    driver = _KilledAtCommit(mysql_space.url)
    store = MysqlMemoryStore(driver, owns_driver=True)
    await store.open()  # the migration's own transaction is not the one under test
    driver.armed = True
    try:
        async with create_ditto(workers=[create_memory_worker(store)]) as runtime:
            result = await runtime.invoke("MEMORY.WRITE", {"memories": [{"content": "x"}]})
    finally:
        await store.aclose()
    assert result.error is not None
    assert (result.error.code, result.error.retryable) == ("OUTCOME_UNKNOWN", False)


async def test_a_search_beyond_the_budget_ranks_the_rare_word_first_then_fills_with_the_newest(
    mysql_space: MysqlSpace,
) -> None:
    from workers.memory import MemoryDraft, SearchInput

    async with MysqlMemoryStore.from_url(mysql_space.url, search_budget=3) as store:
        common = await store.write(
            [MemoryDraft(content=f"common word {n}") for n in range(6)], "create"
        )
        (rare,) = await store.write([MemoryDraft(content="common zebra")], "create")
        hits = await store.search(SearchInput(query="zebra common", limit=3))
    # Phase 1 scored only the holders of the rare word; phase 2 filled with the newest others.
    newest = sorted(common, key=lambda item: (item.created_at, item.id), reverse=True)
    assert hits[0].memory.id == rare.id
    assert {hit.memory.id for hit in hits[1:]} == {newest[0].id, newest[1].id}
    assert all(0 < hit.score <= 1 for hit in hits)


def test_a_search_budget_below_one_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="search_budget"):
        MysqlMemoryStore.from_url("mysql://root@localhost/db", search_budget=0)
