"""``ditto worker dead-letters list | show | replay | purge`` on a real Redis and a private key
prefix: what the workers dead-lettered, replayed only within its deadline, purged only when
confirmed."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
import redis
import redis.asyncio as aioredis
from typer.testing import CliRunner, Result

from ditto.adapters.redis.dead_letters import DeadLetterReason, DeadLetters
from ditto.adapters.redis.keys import SEEN_MARGIN_MS, calls_key, dead_key, seen_key
from ditto.app.cli.app import app
from ditto.runtime.transports.envelope import CallEnvelope, Signer
from tests.adapters.redis.remote.processes import free_port
from tests.app.cli.runner import invoke_cli
from tests.services import RedisSpace

pytestmark = pytest.mark.redis

SECRET = b"dead-letter-cli-secret-0123456789"
NODE = "PROBE.WORK"
DAY_MS = 86_400_000


class Space:
    """The test's prefix, its ``ditto.yaml`` and a client for checks."""

    def __init__(self, redis_space: RedisSpace, directory: Path) -> None:
        self.url = redis_space.url
        self.prefix = redis_space.prefix
        self.config = directory / "ditto.yaml"
        self.config.write_text(f"runtime:\n  remote:\n    prefix: {json.dumps(self.prefix)}\n")
        self.client = redis.Redis.from_url(self.url)

    def cli(self, *args: str, url: str | None = None, input: str | None = None) -> Result:
        env = {"DITTO_RUNTIME_REMOTE_REDIS_URL": url or self.url}
        full = ["worker", "dead-letters", *args, "--config", str(self.config)]
        if input is None:
            return invoke_cli(*full, env=env)
        return CliRunner().invoke(app, full, env=env, input=input, catch_exceptions=False)

    def bury(self, reason: DeadLetterReason, *, deadline_in: float | None = 30.0) -> str:
        """One dead letter as a worker writes it; its id."""
        call = CallEnvelope(
            uuid.uuid4().hex,
            NODE,
            msgspec.Raw(msgspec.msgpack.encode({"n": 1})),
            time.time() + (deadline_in or 0.0),
            "alice",
            None,
            1,
            f"{self.prefix}replies:caller",
        )
        sealed = Signer(SECRET).seal(call)

        async def add() -> None:
            client = aioredis.Redis.from_url(self.url)
            try:
                await DeadLetters(client, self.prefix, "w1").add(
                    reason,
                    "why",
                    stream=calls_key(self.prefix, NODE),
                    sealed=sealed,
                    envelope=None if deadline_in is None else call,
                    deliveries=6,
                )
            finally:
                await client.aclose()

        anyio.run(add)
        newest: Any = self.client.xrevrange(dead_key(self.prefix), count=1)
        return str(newest[0][0].decode())

    def bury_old(self, days: int) -> str:
        """A dead letter added ``days`` ago (its id is its time)."""
        entry_id = f"{int(time.time() * 1000) - days * DAY_MS}-0"
        self.client.xadd(
            dead_key(self.prefix),
            {"reason": "rejected", "detail": "old", "worker": "w0", "at": "0", "e": b"x"},
            id=entry_id,
        )
        return entry_id

    def ids(self) -> set[str]:
        entries: Any = self.client.xrange(dead_key(self.prefix))
        return {entry_id.decode() for entry_id, _ in entries}


@pytest.fixture
def space(redis_space: RedisSpace, tmp_path: Path) -> Iterator[Space]:
    made = Space(redis_space, tmp_path)
    try:
        yield made
    finally:
        made.client.close()


def test_list_shows_the_newest_first_and_the_total(space: Space) -> None:
    first = space.bury(DeadLetterReason.EXHAUSTED)
    second = space.bury(DeadLetterReason.MISROUTED)
    result = space.cli("list", "--json")
    assert result.exit_code == 0, result.output
    listed = json.loads(result.stdout)
    assert listed["total"] == 2
    assert [row["id"] for row in listed["dead_letters"]] == [second, first]
    assert [row["reason"] for row in listed["dead_letters"]] == ["misrouted", "exhausted"]
    assert all(
        row["node_type"] == NODE and row["deliveries"] == 6 for row in listed["dead_letters"]
    )
    table = space.cli("list")
    assert table.exit_code == 0, table.output
    assert "2 dead letters" in table.stdout
    assert first in table.stdout
    assert "exhausted" in table.stdout
    assert "alice" not in table.stdout  # the call stays sealed


def test_show_prints_one_and_an_unknown_id_exits_1(space: Space) -> None:
    letter = space.bury(DeadLetterReason.EXHAUSTED)
    shown = space.cli("show", letter, "--json")
    assert shown.exit_code == 0, shown.output
    row = json.loads(shown.stdout)
    assert (row["id"], row["reason"], row["worker"]) == (letter, "exhausted", "w1")
    assert row["sealed_bytes"] > 0
    text = space.cli("show", letter)
    assert f"id: {letter}" in text.stdout
    assert "reason: exhausted" in text.stdout
    missing = space.cli("show", "1-1")
    assert missing.exit_code == 1
    assert "NOT_FOUND" in missing.stderr


def test_replay_puts_a_live_call_back_on_its_stream(space: Space) -> None:
    letter = space.bury(DeadLetterReason.EXHAUSTED)
    (entry,) = space.client.xrange(dead_key(space.prefix), min=letter, max=letter)
    sealed = entry[1][b"e"]
    execution_id = entry[1][b"execution_id"].decode()
    space.client.set(seen_key(space.prefix, execution_id), b"0-1")
    result = space.cli("replay", letter)
    assert result.exit_code == 0, result.output
    assert "replayed" in result.stdout
    calls: Any = space.client.xrange(calls_key(space.prefix, NODE))
    assert [fields[b"e"] for _, fields in calls] == [sealed]
    # Bound to the new entry: a worker runs it, where it would drop the old entry's copy.
    assert space.client.get(seen_key(space.prefix, execution_id)) == calls[0][0]
    # Remembered until the margin past the call's deadline (30 s away), as a send does.
    assert (
        30_000 < space.client.pttl(seen_key(space.prefix, execution_id)) <= 30_000 + SEEN_MARGIN_MS
    )
    assert letter not in space.ids()


def test_replay_refuses_a_call_past_its_deadline_or_never_opened(space: Space) -> None:
    expired = space.bury(DeadLetterReason.EXHAUSTED, deadline_in=-5.0)
    unopened = space.bury(DeadLetterReason.REJECTED, deadline_in=None)
    late = space.cli("replay", expired)
    assert late.exit_code == 1
    assert "deadline" in late.stderr
    never = space.cli("replay", unopened)
    assert never.exit_code == 1
    assert "never opened" in never.stderr
    assert space.cli("replay", "1-1").exit_code == 1
    assert space.client.exists(calls_key(space.prefix, NODE)) == 0
    assert space.ids() == {expired, unopened}


def test_purge_asks_first_and_deletes_only_when_confirmed(space: Space) -> None:
    kept = {space.bury(DeadLetterReason.EXHAUSTED), space.bury(DeadLetterReason.REJECTED)}
    refused = space.cli("purge", input="n\n")
    assert refused.exit_code != 0
    assert space.ids() == kept
    confirmed = space.cli("purge", input="y\n")
    assert confirmed.exit_code == 0, confirmed.output
    assert "deleted 2 dead letters" in confirmed.stdout
    assert space.ids() == set()


def test_purge_older_than_keeps_the_recent_ones(space: Space) -> None:
    old = {space.bury_old(10), space.bury_old(8)}
    recent = {space.bury_old(2), space.bury(DeadLetterReason.EXHAUSTED)}
    assert space.ids() == old | recent
    result = space.cli("purge", "--older-than", "7d", "--yes", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"deleted": 2}
    assert space.ids() == recent
    bad = space.cli("purge", "--older-than", "soon", "--yes")
    assert bad.exit_code == 2


def test_an_unreachable_redis_exits_3_without_its_address(space: Space) -> None:
    url = f"redis://:hunter2-password@127.0.0.1:{free_port()}/0"
    result = space.cli("list", url=url)
    assert result.exit_code == 3
    assert "TRANSPORT_UNAVAILABLE" in result.stderr
    assert "hunter2" not in result.output
