"""Property tests: the MEMORY worker never crashes, never changes data when it refuses, keeps
every store observably identical, and pages through every record exactly once."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import anyio
import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ditto import create_ditto
from tests.workers.memory.conftest import EMBEDDED, STORE_FACTORIES, StoreEnv, TickingClock
from workers.memory import MemoryStore, create_memory_worker

NODES = [
    "MEMORY.GET",
    "MEMORY.QUERY",
    "MEMORY.SEARCH",
    "MEMORY.WRITE",
    "MEMORY.UPDATE",
    "MEMORY.DELETE",
    "MEMORY.REVIEW",
]
ALLOWED_FAILURES = {"INVALID_INPUT", "NOT_FOUND", "CONFLICT"}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=8,
)
keys = st.sampled_from(["a", "b", "c", "", "a'b", "x" * 300])
drafts = st.fixed_dictionaries(
    {"content": json_values},
    optional={
        "key": keys | json_values,
        "namespace": st.sampled_from(["default", "n", ""]) | json_values,
        "tags": st.lists(st.sampled_from(["t", "u", ""]), max_size=3) | json_values,
        "metadata": st.dictionaries(st.text(max_size=5), json_values, max_size=2) | json_values,
        "category": st.sampled_from(["core", "daily"]) | json_values,
        "pinned": st.booleans() | json_values,
        "visibility": st.sampled_from(["private", "shared", "public"]) | json_values,
        "owner": st.sampled_from(["alice", ""]) | json_values,
        "unknown": json_values,
    },
)
payloads = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"memories": st.lists(drafts, max_size=3)},
        optional={"mode": st.sampled_from(["create", "upsert", "merge"])},
    ),
    st.fixed_dictionaries(
        {},
        optional={
            "ids": st.lists(st.text(max_size=5) | json_values, max_size=3),
            "keys": st.lists(keys, max_size=3),
            "namespace": json_values,
        },
    ),
    st.fixed_dictionaries(
        {},
        optional={
            "filter": st.dictionaries(
                st.sampled_from(
                    [
                        "namespace",
                        "tags_any",
                        "metadata",
                        "key_prefix",
                        "created_after",
                        "colour",
                        "archived",
                        "visible_to",
                        "pinned",
                        "inactive_before",
                    ]
                ),
                json_values,
                max_size=2,
            ),
            "limit": st.integers(-2, 10_002) | json_values,
            "cursor": st.text(max_size=30) | json_values,
            "order_by": st.fixed_dictionaries(
                {}, optional={"field": st.text(max_size=12), "direction": json_values}
            ),
        },
    ),
    st.fixed_dictionaries(
        {"query": json_values},
        optional={"strategy": json_values, "options": json_values, "limit": json_values},
    ),
    st.fixed_dictionaries(
        {
            "updates": st.lists(
                st.fixed_dictionaries(
                    {"id": st.text(max_size=5) | json_values},
                    optional={
                        "content": json_values,
                        "metadata": json_values,
                        "key": json_values,
                        "archived": st.booleans() | json_values,
                        "visibility": json_values,
                        "expected_version": json_values,
                    },
                ),
                max_size=2,
            )
        }
    ),
    st.fixed_dictionaries({"ids": st.lists(st.text(max_size=5), max_size=3) | json_values}),
    st.fixed_dictionaries(
        {
            "decisions": st.lists(
                st.fixed_dictionaries(
                    {"id": st.text(max_size=5) | json_values},
                    optional={
                        "decision": st.sampled_from(["accept", "reject", "maybe"]) | json_values,
                        "expected_version": json_values,
                    },
                ),
                max_size=2,
            )
        },
        optional={"namespace": json_values},
    ),
)


async def snapshot(runtime: Any, store: MemoryStore) -> list[Any]:
    await store.flush()
    everything = {"limit": 10_000, "filter": {"archived": "include"}}
    page = await runtime.invoke("MEMORY.QUERY", everything)
    return msgspec.to_builtins(page.unwrap().items)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(EMBEDDED), node=st.sampled_from(NODES), payload=payloads)
def test_random_inputs_never_crash_and_refusals_change_nothing(
    kind: str, node: str, payload: Any
) -> None:
    async def main() -> None:
        with tempfile.TemporaryDirectory() as directory:
            store = await STORE_FACTORIES[kind](StoreEnv(Path(directory), TickingClock()))
            try:
                async with create_ditto(workers=[create_memory_worker(store)]) as runtime:
                    await runtime.invoke(
                        "MEMORY.WRITE",
                        {
                            "memories": [
                                {"key": "a", "content": "espresso"},
                                {"content": {"n": 1}, "tags": ["t"]},
                            ]
                        },
                    )
                    before = await snapshot(runtime, store)
                    result = await runtime.invoke(node, payload)
                    assert result.status in ("success", "failed")
                    if not result.ok:
                        assert result.error is not None
                        assert result.error.code in ALLOWED_FAILURES, result.error
                        assert await snapshot(runtime, store) == before
            finally:
                await store.aclose()

    anyio.run(main)


operation = st.one_of(
    st.tuples(
        st.just("write"),
        st.lists(st.tuples(st.sampled_from("abcde"), st.integers(0, 3)), max_size=3),
        st.sampled_from(["create", "upsert"]),
    ),
    st.tuples(
        st.just("update"), st.lists(st.sampled_from("abcdez"), max_size=2), st.integers(0, 3)
    ),
    st.tuples(st.just("delete"), st.lists(st.sampled_from("abcdez"), max_size=3), st.none()),
    st.tuples(st.just("archive"), st.lists(st.sampled_from("abcdez"), max_size=2), st.booleans()),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations=st.lists(operation, max_size=12))
def test_random_interleavings_keep_every_store_observably_identical(operations: list[Any]) -> None:
    async def run_on(kind: str, directory: Path) -> list[Any]:
        store = await STORE_FACTORIES[kind](StoreEnv(directory, TickingClock()))
        observations: list[Any] = []
        try:
            async with create_ditto(workers=[create_memory_worker(store)]) as runtime:
                for name, targets, extra in operations:
                    ids = {item["key"]: item["id"] for item in await snapshot(runtime, store)}
                    if name == "write":
                        request = {
                            "memories": [
                                {"key": key, "content": value, "tags": [str(value)]}
                                for key, value in dict(targets).items()
                            ],
                            "mode": extra,
                        }
                        result = await runtime.invoke("MEMORY.WRITE", request)
                    elif name == "update":
                        updates = [
                            {
                                "id": ids.get(key, f"missing-{key}"),
                                "content": extra,
                                "metadata": {"v": extra},
                            }
                            for key in dict.fromkeys(targets)
                        ]
                        result = await runtime.invoke("MEMORY.UPDATE", {"updates": updates})
                    elif name == "archive":
                        updates = [
                            {"id": ids.get(key, f"missing-{key}"), "archived": extra}
                            for key in dict.fromkeys(targets)
                        ]
                        result = await runtime.invoke("MEMORY.UPDATE", {"updates": updates})
                    else:
                        deleting = [ids.get(key, f"missing-{key}") for key in targets]
                        result = await runtime.invoke("MEMORY.DELETE", {"ids": deleting})
                    observations.append(
                        (result.status, result.error.code if result.error else None)
                    )
                final = await snapshot(runtime, store)
        finally:
            await store.aclose()
        for record in final:
            record.pop("id")
        return [observations, sorted(final, key=lambda record: record["key"])]

    async def main() -> None:
        with tempfile.TemporaryDirectory() as directory:
            results = [await run_on(kind, Path(directory) / kind) for kind in EMBEDDED]
        assert all(result == results[0] for result in results)

    anyio.run(main)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(EMBEDDED),
    records=st.lists(st.tuples(st.sampled_from(["n1", "n2"]), st.integers(0, 2)), max_size=40),
    page_size=st.integers(1, 7),
    field=st.sampled_from(["created_at", "updated_at", "last_used_at", "usage_count"]),
    direction=st.sampled_from(["asc", "desc"]),
    namespace=st.none() | st.sampled_from(["n1", "n2"]),
    searches=st.lists(st.integers(0, 2), max_size=3),
)
def test_query_pagination_returns_every_record_exactly_once(
    kind: str,
    records: list[tuple[str, int]],
    page_size: int,
    field: str,
    direction: str,
    namespace: str | None,
    searches: list[int],
) -> None:
    async def main() -> None:
        with tempfile.TemporaryDirectory() as directory:
            store = await STORE_FACTORIES[kind](StoreEnv(Path(directory), TickingClock()))
            try:
                async with create_ditto(workers=[create_memory_worker(store)]) as runtime:
                    for ns, word in records:  # one write per record: distinct timestamps and ties
                        await runtime.invoke(
                            "MEMORY.WRITE",
                            {"memories": [{"namespace": ns, "content": f"word{word}"}]},
                        )
                    for word in searches:
                        await runtime.invoke("MEMORY.SEARCH", {"query": f"word{word}", "limit": 3})
                    await store.flush()
                    filter = {"namespace": namespace} if namespace else {}
                    expected = {
                        item["id"]
                        for item in await snapshot(runtime, store)
                        if namespace in (None, item["namespace"])
                    }
                    seen: list[str] = []
                    cursor = None
                    while True:
                        request: dict[str, Any] = {
                            "limit": page_size,
                            "filter": filter,
                            "order_by": {"field": field, "direction": direction},
                        }
                        if cursor:
                            request["cursor"] = cursor
                        page = (await runtime.invoke("MEMORY.QUERY", request)).unwrap()
                        seen.extend(item.id for item in page.items)
                        cursor = page.next_cursor
                        if cursor is None:
                            break
                    assert len(seen) == len(set(seen))
                    assert set(seen) == expected
            finally:
                await store.aclose()

    anyio.run(main)


def test_calibrated_bm25_is_documented_and_bounded() -> None:
    """``1 - exp(-bm25 / ideal)``: 0 without a match, 1 - 1/e for the ideal record, up to 1."""
    import math

    from workers.memory.retrieval.keyword import calibrated, idf

    ideal = idf(1000, 3) + idf(1000, 50)
    assert calibrated(0.0, ideal) == 0.0
    assert math.isclose(calibrated(ideal, ideal), 1 - 1 / math.e)
    assert 0.99 < calibrated(5 * ideal, ideal) < 1.0
    assert calibrated(idf(1000, 3), ideal) > calibrated(idf(1000, 50), ideal)  # rarer counts more
    assert idf(1000, 900) == 1e-6  # a word in most records carries (almost) nothing
