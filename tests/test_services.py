"""The service fixtures give each test a private, working space and clean it up."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.services import MysqlSpace, PostgresSpace, RedisSpace

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.redis
def test_redis_space_gives_a_private_prefix(redis_space: RedisSpace) -> None:
    import redis

    client = redis.Redis.from_url(redis_space.url)
    try:
        client.set(f"{redis_space.prefix}probe", b"1")
        assert client.get(f"{redis_space.prefix}probe") == b"1"
        assert redis_space.prefix.startswith("ditto-test:")
    finally:
        client.close()


@pytest.mark.postgres
def test_postgres_space_is_a_private_schema(postgres_space: PostgresSpace) -> None:
    import asyncpg

    async def probe() -> str | None:
        connection = await asyncpg.connect(postgres_space.url)
        try:
            await connection.execute(f'CREATE TABLE "{postgres_space.schema}".probe (x int)')
            return await connection.fetchval(
                "SELECT table_schema FROM information_schema.tables WHERE table_name = 'probe' "
                "AND table_schema = $1",
                postgres_space.schema,
            )
        finally:
            await connection.close()

    assert asyncio.run(probe()) == postgres_space.schema


@pytest.mark.mysql
def test_mysql_space_is_a_private_database(mysql_space: MysqlSpace) -> None:
    import pymysql

    from workers.memory.stores.mysql.asyncmy_driver import MysqlUrl

    parts = MysqlUrl.parse(mysql_space.url)
    assert parts.database == mysql_space.database
    assert mysql_space.database.startswith("ditto_test_")
    connection = pymysql.connect(
        host=parts.host, port=parts.port, user=parts.user, password=parts.password,
        database=parts.database,
    )  # fmt: skip
    try:
        with connection.cursor() as cursor:
            cursor.execute("CREATE TABLE probe (x int)")
            cursor.execute("SELECT DATABASE()")
            assert cursor.fetchone() == (mysql_space.database,)
    finally:
        connection.close()


@pytest.mark.parametrize(("required", "outcome"), [("", "1 skipped"), ("1", "1 error")])
def test_a_missing_mysql_url_skips_with_its_reason_or_fails_when_required(
    tmp_path: Path, required: str, outcome: str
) -> None:
    (tmp_path / "conftest.py").write_text("from tests.services import mysql_space, mysql_url\n")
    (tmp_path / "test_probe.py").write_text("def test_probe(mysql_space):\n    pass\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DITTO_REQUIRE_SERVICES": required}
    env.pop("DITTO_TEST_MYSQL_URL", None)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-rs", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert outcome in run.stdout
    assert "MySQL tests need DITTO_TEST_MYSQL_URL" in run.stdout
