"""Every MEMORY and CONTEXT node, on every store, fed hostile input.

Hostile means: random JSON-ish structures, wrong types, unknown fields, lone surrogates in every
string position (dict keys and enum-like fields such as ``mode``, ``strategy``, ``purpose``
included), NUL characters, NaN and infinities, integers past 64 bits and past the float range,
nesting 64, 65, 200 and 1,500 levels deep, 100,000-character strings, and Python values that are
not JSON at all.

Properties of every call, on each store (MEMORY: in-process, SQLite, PostgreSQL; CONTEXT:
in-process and Redis, explicit and scoped mode):

* ``runtime.invoke`` never raises: it returns a ``NodeResult``, ``success`` or ``failed``;
* a failure carries a code the README gives for the caller's own mistake (bad input is
  ``INVALID_INPUT``: never ``INTERNAL_ERROR``, ``MEMORY_BACKEND_ERROR`` or ``INVALID_STATE``),
  with a message that is valid Unicode;
* a refused call changes nothing stored: every record (archived ones too), every seeded scope's
  working set and version, are the same before and after it — and SELECT never changes a scope;
* whatever a call stored can be read back: QUERY, and a scoped LOAD and SELECT, succeed after it.

Each test shares one store between its examples (as an application would), so the campaign also
covers inputs arriving at a store that earlier hostile calls have changed.

Bugs the campaign found are pinned at the end of this module by the smallest input that showed
each (all fixed; each test failed before its fix).
"""

from __future__ import annotations

import math
import operator
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ditto import Ditto, NodeResult, create_ditto
from tests.reliability.conftest import FUZZ, FUZZ_TIMEOUT
from tests.services import RedisSpace
from tests.workers.memory.conftest import MemoryHarness
from workers.context import (
    ContextStateStore,
    InProcessContextStore,
    RedisContextStore,
    create_context_worker,
)

pytestmark = pytest.mark.anyio

# --------------------------------------------------------------------------- hostile values


def nested(depth: int, *, mapping: bool = False) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"k": value} if mapping else [value]
    return value


DEEP = tuple(
    nested(depth, mapping=mapping) for depth in (64, 65, 200, 1_500) for mapping in (False, True)
)
"""Just inside and just past MEMORY's 64-level limit, the brief's 200 levels, and deeper than
Python's recursion limit."""
LONG = "x" * 100_000
LONG_WORDS = "espresso tea " * 8_000
SPECIAL_TEXT = (
    "",
    " ",
    "\x00",
    "a\x00b",
    "\ud800",
    "x\udfffy",
    "\udc80\ud800",
    "\ufeff",
    "\u202e",
    "💥",
    "%",
    "_",
    "'",
    '"',
    "\\",
    "*",
    '"* OR NEAR(a b) -',
    "$.a",
    "a.b",
    "default",
    "core",
    "keyword",
    "infer",
    "create",
    "espresso",
    LONG,
    LONG_WORDS,
)
NON_FINITE = (math.nan, math.inf, -math.inf)
FLOAT_EDGES = (-0.0, 1e308, -1e308, 5e-324)
PAST_64_BITS = (2**63, -(2**63) - 1, 2**64, 10**30)
PAST_FLOATS = (2**1100, -(2**1100))  # larger than the largest float
SPECIAL_NUMBERS = (*NON_FINITE, *FLOAT_EDGES, 2**31, 2**53 + 1, 2**63 - 1, *PAST_64_BITS)
NOT_JSON = (
    b"bytes",
    bytearray(b"x"),
    (1, "tuple"),
    frozenset({1}),
    Decimal("1.5"),
    complex(1, 2),
    datetime(2026, 1, 1, tzinfo=UTC),
    datetime(2026, 1, 1),
    object(),
)

surrogates = st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1)
text = st.one_of(
    st.text(max_size=10),
    st.sampled_from(SPECIAL_TEXT),
    st.builds(operator.add, st.text(max_size=3), surrogates),
    st.builds("{}\x00{}".format, st.text(max_size=3), st.text(max_size=3)),
)
special_numbers = st.one_of(
    st.sampled_from(NON_FINITE),
    st.sampled_from(FLOAT_EDGES),
    st.sampled_from(PAST_64_BITS),
    st.sampled_from(PAST_FLOATS),
    st.sampled_from(SPECIAL_NUMBERS),
)
numbers = st.one_of(st.integers(), st.floats(), special_numbers)
anything = st.one_of(
    st.recursive(
        st.none() | st.booleans() | numbers | text | st.sampled_from(NOT_JSON),
        lambda children: (
            st.lists(children, max_size=3)
            | st.dictionaries(text | st.integers(), children, max_size=3)
        ),
        max_leaves=6,
    ),
    st.sampled_from(DEEP),
)
"""Any value at all: what a field gets when the caller has it wrong."""
unknown_names = st.sampled_from(["colour", "\ud800", "", "id\x00", "Mode"]) | text

# --------------------------------------------------------------------------- valid, then broken

# Valid payloads come first, the edges of valid included (integers past 64 bits, NUL in free
# text, 63 levels of nesting); then one or two mutations break one place each, so every hostile
# value meets an otherwise valid input and reaches the code behind the contract.
names = st.text(min_size=1, max_size=8) | st.sampled_from(("a", "default", "espresso"))
json_values = st.one_of(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(max_size=10),
        lambda children: (
            st.lists(children, max_size=3)
            | st.dictionaries(st.text(max_size=6), children, max_size=3)
        ),
        max_leaves=6,
    ),
    st.sampled_from((2**100, -(2**64), 1e308, -0.0, "a\x00b", "💥", nested(60), LONG_WORDS)),
)


def _paths(value: Any) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Where a value may be broken, a few levels down: every place, and the leaves alone."""
    paths: list[tuple[Any, ...]] = [()]
    leaves: list[tuple[Any, ...]] = []
    stack: list[tuple[tuple[Any, ...], Any]] = [((), value)]
    while stack and len(paths) < 200:
        path, current = stack.pop()
        if isinstance(current, dict):
            children: Any = current.items()
        elif isinstance(current, list):
            children = enumerate(current)
        else:
            leaves.append(path)
            continue
        if len(path) >= 6:
            continue
        for step, child in children:
            paths.append((*path, step))
            stack.append(((*path, step), child))
    return paths, leaves


def _at(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    """A copy of ``value`` with ``new`` at ``path`` (the generated value is left as it was)."""
    if not path:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[path[0]] = _replaced(value[path[0]], path[1:], new)
    return copy


def _renamed(mapping: dict[Any, Any], key: Any, suffix: str) -> dict[Any, Any]:
    return {(f"{name}{suffix}" if name == key else name): child for name, child in mapping.items()}


def _broken(old: Any) -> st.SearchStrategy[Any]:
    """A hostile replacement for ``old``, mostly of its own kind."""
    if isinstance(old, bool):
        kin: st.SearchStrategy[Any] = st.sampled_from([0, 1, "true", None, "\ud800"])
    elif isinstance(old, int | float):
        kin = special_numbers
    elif isinstance(old, str):
        kin = st.sampled_from(SPECIAL_TEXT) | st.builds(
            old.__add__, surrogates | st.just("\x00") | st.just(LONG)
        )
    elif isinstance(old, dict):
        kin = st.builds(lambda key, child: {**old, key: child}, unknown_names, anything)
        if old:
            kin |= st.builds(_renamed, st.just(old), st.sampled_from(list(old)), surrogates)
    elif isinstance(old, list):
        kin = st.builds(lambda child: [*old, child], anything) | st.sampled_from(DEEP)
    else:
        kin = anything
    return st.one_of(kin, kin, anything)


@st.composite
def _mutated(draw: st.DrawFn, valid: st.SearchStrategy[Any]) -> Any:
    payload = draw(valid)
    for _ in range(draw(st.integers(1, 2))):
        paths, leaves = _paths(payload)
        # Half the time a leaf: a value in a valid place reaches further than a broken shape.
        path = draw(st.sampled_from(leaves if leaves and draw(st.booleans()) else paths))
        payload = _replaced(payload, path, draw(_broken(_at(payload, path))))
    return payload


def fuzzed(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly a valid payload with one or two places broken; sometimes a valid one, sometimes
    anything at all."""
    broken = _mutated(valid)
    return st.one_of(broken, broken, broken, broken, valid, anything)


def obj(
    required: dict[str, st.SearchStrategy[Any]], optional: dict[str, st.SearchStrategy[Any]]
) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(required, optional=optional)


# --------------------------------------------------------------------------- placeholders

ID_SLOTS = ("@id0", "@id1", "@id2")
"""Stand for the seeded records' ids (known only once the store has assigned them)."""


def bind(value: Any, slots: dict[str, str], depth: int = 0) -> Any:
    """``value`` with every placeholder string (an id, a cursor, a version) within the first
    few levels replaced; the rest (the deep values above) is kept as generated."""
    if isinstance(value, str):
        return slots.get(value, value)
    if depth > 4:
        return value
    if isinstance(value, dict):
        return {key: bind(child, slots, depth + 1) for key, child in value.items()}
    if isinstance(value, list):
        return [bind(child, slots, depth + 1) for child in value]
    return value


# --------------------------------------------------------------------------- MEMORY

MAX_RECORDS = 300
"""Records a test's store may gather before it is emptied (the seeds come back next example)."""
MEMORY_CALLER_ERRORS = {"INVALID_INPUT", "NOT_FOUND", "CONFLICT", "SEARCH_UNAVAILABLE"}
"""What a caller's mistake may be answered with (without an embedder, a vector strategy is
SEARCH_UNAVAILABLE); anything else is the store or the worker failing."""
SEEDS = (
    {"key": "seed:espresso", "content": "espresso machine", "tags": ["kitchen"]},
    {"key": "seed:tea", "content": {"drink": "tea"}, "metadata": {"n": 1}, "category": "daily"},
    {"key": "seed:other", "namespace": "other", "content": ["x", 1]},
)

keys = st.sampled_from(["seed:espresso", "seed:tea", "seed:other", "fresh"]) | names
ids = st.sampled_from(ID_SLOTS) | names
namespaces = st.sampled_from(["default", "other"])
timestamps = st.sampled_from(
    [
        "2026-01-01T00:00:00Z",
        "0001-01-01T00:00:00+23:59",  # before year 1 in UTC
        "9999-12-31T23:59:59-23:59",  # after year 9999 in UTC
    ]
) | st.datetimes(
    timezones=st.sampled_from(
        [UTC, timezone(timedelta(hours=23, minutes=59)), timezone(-timedelta(hours=23))]
    )
)
scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
memory_filter = obj(
    {},
    {
        "namespace": namespaces,
        "category": st.sampled_from(["core", "daily"]),
        "key": keys,
        "key_prefix": names,
        "tags_any": st.lists(names, max_size=3),
        "tags_all": st.lists(names, max_size=3),
        "source": names,
        "metadata": st.dictionaries(
            st.sampled_from(["n", "lang", "saved_at", "a-b:c"]), scalars, max_size=2
        ),
        "created_after": timestamps,
        "created_before": timestamps,
        "updated_after": timestamps,
        "updated_before": timestamps,
        "inactive_before": timestamps,
        "pinned": st.booleans(),
        "owner": names,
        "visible_to": names,
        "archived": st.sampled_from(["exclude", "include", "only"]),
    },
)
limits = st.integers(1, 10_000)
draft = obj(
    {"content": json_values},
    {
        "key": keys,
        "namespace": namespaces,
        "summary": st.text(max_size=10),
        "category": st.sampled_from(["core", "daily", "conversation", "custom"]),
        "tags": st.lists(names, max_size=3),
        "metadata": st.dictionaries(st.text(max_size=6), json_values, max_size=3),
        "source": names,
        "pinned": st.booleans(),
        "visibility": st.sampled_from(["private", "shared"]),
        "owner": names,
    },
)
patch = obj(
    {"id": ids},
    {
        "content": json_values,
        "summary": st.text(max_size=10),
        "metadata": st.dictionaries(st.text(max_size=6), json_values, max_size=3),
        "tags": st.lists(names, max_size=3),
        "category": st.sampled_from(["core", "daily"]),
        "pinned": st.booleans(),
        "visibility": st.sampled_from(["private", "shared"]),
        "archived": st.booleans(),
        "expected_version": st.integers(1, 3),
    },
)
weights = st.floats(0, 1)
MEMORY_PAYLOADS: dict[str, st.SearchStrategy[Any]] = {
    "MEMORY.GET": obj(
        {},
        {
            "ids": st.lists(ids, max_size=4),
            "keys": st.lists(keys, max_size=4),
            "namespace": namespaces,
            "include_archived": st.booleans(),
        },
    ),
    "MEMORY.QUERY": obj(
        {},
        {
            "filter": memory_filter,
            "limit": limits,
            "cursor": st.just("@cursor"),
            "order_by": obj(
                {},
                {
                    "field": st.sampled_from(
                        ["created_at", "updated_at", "last_used_at", "usage_count"]
                    ),
                    "direction": st.sampled_from(["asc", "desc"]),
                },
            ),
        },
    ),
    "MEMORY.SEARCH": obj(
        {"query": st.sampled_from(["espresso", "tea drink", "x"]) | st.text(max_size=20)},
        {
            "strategy": st.sampled_from(["auto", "keyword", "vector", "hybrid", "recent-keyword"]),
            "filter": memory_filter,
            "limit": limits,
            "options": obj(
                {},
                {
                    "fusion": st.sampled_from(["rrf", "weighted"]),
                    "rrf_k": st.integers(1, 100),
                    "vector_weight": weights,
                    "keyword_weight": weights,
                    "min_score": st.floats(-1, 1),
                    "explain": st.booleans(),
                },
            ),
        },
    ),
    "MEMORY.WRITE": obj(
        {"memories": st.lists(draft, max_size=3)},
        {"mode": st.sampled_from(["create", "upsert"])},
    ),
    "MEMORY.UPDATE": obj({"updates": st.lists(patch, max_size=3)}, {}),
    "MEMORY.DELETE": obj({"ids": st.lists(ids, max_size=3)}, {}),
    "MEMORY.REVIEW": obj(
        {
            "decisions": st.lists(
                obj(
                    {"id": ids, "decision": st.sampled_from(["accept", "reject"])},
                    {"expected_version": st.integers(1, 3)},
                ),
                max_size=3,
            )
        },
        {"namespace": namespaces},
    ),
}


async def _records(memory: MemoryHarness) -> list[Any]:
    """Every record, archived ones too (and the read must work: nothing stored poisons it)."""
    await memory.store.flush()
    page = await memory.call("MEMORY.QUERY", {"limit": 10_000, "filter": {"archived": "include"}})
    assert page.ok, page.error
    return msgspec.to_builtins(page.output.items)


async def _memory_slots(memory: MemoryHarness) -> dict[str, str]:
    """The seeded records exist (hostile calls may have deleted them): their ids by slot, and a
    cursor for QUERY's first page."""
    slots: dict[str, str] = {}
    for slot, seed in zip(ID_SLOTS, SEEDS, strict=True):
        namespace = str(seed.get("namespace", "default"))
        found = await memory.call(
            "MEMORY.GET", {"keys": [seed["key"]], "namespace": namespace, "include_archived": True}
        )
        assert found.ok, found.error
        items = found.output.items or await memory.write(seed)
        slots[slot] = items[0].id
    first = await memory.call("MEMORY.QUERY", {"limit": 1})
    assert first.ok, first.error
    if first.output.next_cursor is not None:
        slots["@cursor"] = first.output.next_cursor
    return slots


def _assert_well_formed(result: Any, allowed: set[str]) -> None:
    assert isinstance(result, NodeResult)
    assert result.status in ("success", "failed"), result
    if result.status == "failed":
        assert result.error is not None
        assert result.error.code in allowed, result.error
        result.error.message.encode("utf-8")  # safe to show, log or send as JSON


async def _fuzz_memory(memory: MemoryHarness, node: str, payload: Any) -> None:
    payload = bind(payload, await _memory_slots(memory))
    before = await _records(memory)

    result = await memory.call(node, payload)

    _assert_well_formed(result, MEMORY_CALLER_ERRORS)
    after = await _records(memory)  # also: whatever a success stored reads back
    if not result.ok:
        assert after == before
    if len(after) > MAX_RECORDS:  # each example reads everything twice: keep that cheap
        cleared = await memory.call("MEMORY.DELETE", {"ids": [item["id"] for item in after]})
        assert cleared.ok, cleared.error


MEMORY_STORES = ("inprocess", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres))


def _memory_fuzz(node: str) -> Any:
    """The fuzz test of one MEMORY node, on every store. (Each node gets its own test function
    so that its payloads are drawn by ``@given`` itself: a draw inside an async test that runs
    out of data would stop the event loop the fixtures share.)"""

    @pytest.mark.parametrize("store_kind", MEMORY_STORES)
    @FUZZ_TIMEOUT
    @FUZZ
    @given(payload=fuzzed(MEMORY_PAYLOADS[node]))
    async def test(memory: MemoryHarness, store_kind: str, payload: Any) -> None:
        await _fuzz_memory(memory, node, payload)

    return test


test_memory_get_survives_hostile_input = _memory_fuzz("MEMORY.GET")
test_memory_query_survives_hostile_input = _memory_fuzz("MEMORY.QUERY")
test_memory_search_survives_hostile_input = _memory_fuzz("MEMORY.SEARCH")
test_memory_write_survives_hostile_input = _memory_fuzz("MEMORY.WRITE")
test_memory_update_survives_hostile_input = _memory_fuzz("MEMORY.UPDATE")
test_memory_delete_survives_hostile_input = _memory_fuzz("MEMORY.DELETE")
test_memory_review_survives_hostile_input = _memory_fuzz("MEMORY.REVIEW")


# --------------------------------------------------------------------------- CONTEXT

CONTEXT_CALLER_ERRORS = {
    "INVALID_INPUT",
    "INLINE_LIMIT_EXCEEDED",
    "ITEM_LIMIT_EXCEEDED",
    "DUPLICATE_ITEM",
    "MISSING_ITEM",
    "STRATEGY_UNAVAILABLE",
    "BUDGET_UNSATISFIABLE",
    "RESOLVER_UNAVAILABLE",
    "CONTEXT_NOT_FOUND",
    "STATE_CONFLICT",
}
"""Never STATE_STORE_UNAVAILABLE (the store is up), INVALID_STATE (nothing corrupts it) or
INTERNAL_ERROR."""
SCOPES = {"s1": {"session_id": "s1"}, "s2": {"session_id": "s2", "turn_id": "t"}}
MISSING_SCOPE = {"session_id": "never-loaded"}
SEED_SOURCES = [
    {"role": "system", "content": "be brief"},
    {"id": "goal", "content": "find the espresso", "metadata": {"current_goal": True}},
    {"id": "call", "content": {"tool": "search"}, "metadata": {"call_id": "c1", "priority": 2}},
    {"id": "result", "content": "espresso found", "metadata": {"call_id": "c1"}},
    {"uri": "file:policy.md"},
]
VERSION_SLOTS = ("@v:s1", "@v:s2")

item_ids = st.sampled_from(["goal", "call", "result", "new", "a"]) | names
item_metadata = obj(
    {},
    {
        "protected": st.booleans(),
        "current_goal": st.booleans(),
        "call_id": st.sampled_from(["c1", "c2"]),
        "priority": st.integers(-3, 3) | st.floats(allow_nan=False),
        "relevance": st.floats(0, 1),
        "role": st.sampled_from(["system", "user"]),
        "private": st.booleans(),
        "memory_candidate": st.booleans(),
        "retrievable": st.booleans(),
    },
) | st.dictionaries(st.text(max_size=6), json_values, max_size=2)
reference = obj({"uri": st.just("file:a.md") | names}, {"media_type": names, "digest": names})
item = obj({"id": item_ids, "content": json_values}, {"metadata": item_metadata})
referenced_item = obj(
    {"id": item_ids, "content": st.just([{"type": "reference"}]), "source": reference}, {}
)
message = obj(
    {"role": st.sampled_from(["system", "user", "assistant", "tool"]), "content": json_values},
    {"name": names},
)
context = obj({"items": st.lists(item | referenced_item, max_size=4)}, {})
scope = st.sampled_from([*SCOPES.values(), MISSING_SCOPE]) | obj(
    {}, {"session_id": names, "turn_id": names, "invocation_id": names}
)
budgets = st.integers(0, 1_000_000)
expected_version = st.sampled_from([*VERSION_SLOTS, "stale"])


def _modes(
    required: dict[str, st.SearchStrategy[Any]], optional: dict[str, st.SearchStrategy[Any]]
) -> st.SearchStrategy[dict[str, Any]]:
    """Explicit mode (a context) or scoped mode (a scope, maybe the version it read)."""
    return obj({**required, "context": context}, optional) | obj(
        {**required, "scope": scope}, {**optional, "expected_version": expected_version}
    )


CONTEXT_PAYLOADS: dict[str, st.SearchStrategy[Any]] = {
    "CONTEXT.LOAD": obj(
        {"sources": st.lists(item | message | reference, max_size=4)},
        {"resolve_references": st.just(False)},
    )
    | obj(
        {"scope": scope},
        {
            "sources": st.lists(item | message | reference, max_size=4),
            "expected_version": expected_version,
        },
    ),
    "CONTEXT.SELECT": _modes(
        {"purpose": st.sampled_from(["infer", "memory"])},
        {
            "query": st.sampled_from(["espresso", "tool search"]) | st.text(max_size=10),
            "limit": budgets,
            "max_tokens": budgets,
            "strategy": obj({"kind": st.just("default")}, {}),
        },
    ),
    "CONTEXT.UPDATE": _modes(
        {},
        {
            "remove_ids": st.lists(item_ids, max_size=2),
            "add": st.lists(item, max_size=3),
            "ingress": st.lists(
                obj(
                    {
                        "id": item_ids,
                        "source_node": st.sampled_from(["MEMORY.SEARCH", "A.B"]),
                        "content": json_values,
                    },
                    {"metadata": item_metadata},
                ),
                max_size=2,
            ),
        },
    ),
    "CONTEXT.COMPRESS": _modes({}, {"max_items": budgets, "max_tokens": budgets}),
}


def make_context_store(kind: str, redis_space: RedisSpace | None) -> ContextStateStore:
    if kind == "inprocess":
        return InProcessContextStore()
    assert redis_space is not None
    # The default TTL (an hour), unlike the context suite's 200 ms: a working set must not expire
    # between the two reads that compare it.
    return RedisContextStore.from_url(redis_space.url, key_prefix=redis_space.prefix)


@pytest.fixture
async def context_runtime(
    context_kind: str, request: pytest.FixtureRequest
) -> AsyncIterator[Ditto]:
    space = request.getfixturevalue("redis_space") if context_kind == "redis" else None
    store = make_context_store(context_kind, space)
    try:
        async with create_ditto(workers=[create_context_worker(store=store)]) as runtime:
            yield runtime
    finally:
        await store.aclose()


async def _scope_state(runtime: Ditto, scope: Any) -> Any:
    read = await runtime.invoke("CONTEXT.LOAD", {"scope": scope})
    if read.ok:
        return msgspec.to_builtins(read.output)
    assert read.error is not None
    assert read.error.code in ("CONTEXT_NOT_FOUND", "INVALID_INPUT"), read.error
    return read.error.code


async def _context_slots(runtime: Ditto) -> dict[str, str]:
    """The seeded scopes exist and stay small (hostile calls change them): their versions."""
    slots = {}
    for name, seeded in SCOPES.items():
        state = await _scope_state(runtime, seeded)
        if not isinstance(state, dict) or len(state["items"]) > 50:
            loaded = await runtime.invoke(
                "CONTEXT.LOAD", {"scope": seeded, "sources": SEED_SOURCES}
            )
            assert loaded.ok, loaded.error
            state = msgspec.to_builtins(loaded.output)
        slots[f"@v:{name}"] = state["version"]
    return slots


async def _context_snapshot(runtime: Ditto, payload: Any) -> list[Any]:
    scopes: list[Any] = [*SCOPES.values(), MISSING_SCOPE]
    if isinstance(payload, dict) and isinstance(payload.get("scope"), dict):
        scopes.append(payload["scope"])  # the call's own scope, whatever it is
    return [await _scope_state(runtime, one) for one in scopes]


async def _assert_scopes_usable(runtime: Ditto) -> None:
    """What a call left in a seeded scope can still be selected from."""
    for seeded in SCOPES.values():
        for purpose in ("infer", "memory"):
            selected = await runtime.invoke(
                "CONTEXT.SELECT",
                {"scope": seeded, "purpose": purpose, "query": "espresso", "max_tokens": 10_000},
            )
            assert selected.ok, selected.error


async def _fuzz_context(runtime: Ditto, node: str, payload: Any) -> None:
    payload = bind(payload, await _context_slots(runtime))
    before = await _context_snapshot(runtime, payload)

    result = await runtime.invoke(node, payload)

    _assert_well_formed(result, CONTEXT_CALLER_ERRORS)
    if not result.ok or node == "CONTEXT.SELECT":
        assert await _context_snapshot(runtime, payload) == before
    await _assert_scopes_usable(runtime)


CONTEXT_STORES = ("inprocess", pytest.param("redis", marks=pytest.mark.redis))


def _context_fuzz(node: str) -> Any:
    """The fuzz test of one CONTEXT node, explicit and scoped, on every store."""

    @pytest.mark.parametrize("context_kind", CONTEXT_STORES)
    @FUZZ_TIMEOUT
    @FUZZ
    @given(payload=fuzzed(CONTEXT_PAYLOADS[node]))
    async def test(context_runtime: Ditto, context_kind: str, payload: Any) -> None:
        await _fuzz_context(context_runtime, node, payload)

    return test


test_context_load_survives_hostile_input = _context_fuzz("CONTEXT.LOAD")
test_context_select_survives_hostile_input = _context_fuzz("CONTEXT.SELECT")
test_context_update_survives_hostile_input = _context_fuzz("CONTEXT.UPDATE")
test_context_compress_survives_hostile_input = _context_fuzz("CONTEXT.COMPRESS")


# --------------------------------------------------------------------------- regressions

# Bugs this campaign found, each pinned by the smallest input that showed it (all fixed).


@pytest.mark.parametrize("store_kind", ["inprocess"])  # the search engine is the same on each
@pytest.mark.parametrize("option", ["min_score", "rrf_k", "vector_weight", "keyword_weight"])
async def test_search_option_past_the_float_range_is_invalid_input(
    memory: MemoryHarness, option: str
) -> None:
    """Was MEMORY_BACKEND_ERROR: ``math.isfinite(2**1100)`` raises OverflowError."""
    result = await memory.call("MEMORY.SEARCH", {"query": "espresso", "options": {option: 2**1100}})
    assert result.error is not None
    assert result.error.code == "INVALID_INPUT", result.error


@pytest.mark.parametrize("store_kind", MEMORY_STORES)
@pytest.mark.parametrize("node", ["MEMORY.QUERY", "MEMORY.SEARCH"])
@pytest.mark.parametrize("value", [2**63, -(2**63) - 1])
async def test_metadata_filter_past_64_bits_is_invalid_input(
    memory: MemoryHarness, node: str, value: int
) -> None:
    """Was MEMORY_BACKEND_ERROR on SQLite: sqlite3 cannot bind the integer (OverflowError)."""
    await memory.write({"content": "espresso", "metadata": {"n": 1}})
    payload: dict[str, Any] = {"filter": {"metadata": {"n": value}}}
    if node == "MEMORY.SEARCH":
        payload["query"] = "espresso"
    result = await memory.call(node, payload)
    assert result.error is not None
    assert result.error.code == "INVALID_INPUT", result.error


DEEPER_THAN_PYTHON = nested(1_500)


@pytest.mark.parametrize(
    ("node", "payload"),
    [
        ("CONTEXT.LOAD", {"sources": [{"id": "a", "content": DEEPER_THAN_PYTHON}]}),
        ("CONTEXT.LOAD", {"sources": [{"role": "user", "content": DEEPER_THAN_PYTHON}]}),
        (
            "CONTEXT.UPDATE",
            {"context": {"items": []}, "add": [{"id": "a", "content": DEEPER_THAN_PYTHON}]},
        ),
        (
            "CONTEXT.SELECT",
            {"purpose": "infer", "context": {"items": []}, "query": DEEPER_THAN_PYTHON},
        ),
        (
            "CONTEXT.COMPRESS",
            {"context": {"items": [{"id": "a", "content": DEEPER_THAN_PYTHON}]}, "max_tokens": 1},
        ),
    ],
    ids=["load-item", "load-message", "update-add", "select-query", "compress"],
)
@pytest.mark.parametrize("context_kind", CONTEXT_STORES)
async def test_context_nesting_past_the_recursion_limit_is_invalid_input(
    context_runtime: Ditto, node: str, payload: dict[str, Any]
) -> None:
    """Was INTERNAL_ERROR: the canonical JSON walk and ``msgspec.to_builtins`` recurse
    (RecursionError)."""
    result = await context_runtime.invoke(node, payload)
    assert result.error is not None
    assert result.error.code == "INVALID_INPUT", result.error


@pytest.mark.parametrize(
    "source",
    [
        {"role": "\ud800", "content": "x"},
        {"role": "user", "content": "x", "\ud800": 1},
        {"id": "a", "content": "x", "\udfff": 1},
        {"\ud800": "file:a.md"},
    ],
    ids=["role", "message-field", "item-field", "reference-field"],
)
@pytest.mark.parametrize("scoped", [False, True], ids=["explicit", "scoped"])
@pytest.mark.parametrize("context_kind", CONTEXT_STORES)
async def test_context_source_with_a_lone_surrogate_field_is_invalid_input(
    context_runtime: Ditto, source: dict[str, Any], scoped: bool
) -> None:
    """Was INTERNAL_ERROR: ``msgspec.convert`` raises UnicodeEncodeError for a LOAD source's
    enum value or field name holding a lone surrogate."""
    payload: dict[str, Any] = {"sources": [source]}
    if scoped:
        payload["scope"] = SCOPES["s1"]
    result = await context_runtime.invoke("CONTEXT.LOAD", payload)
    assert result.error is not None
    assert result.error.code == "INVALID_INPUT", result.error
    if scoped:
        assert await _scope_state(context_runtime, SCOPES["s1"]) == "CONTEXT_NOT_FOUND"


HUGE_PRIORITY = {"id": "big", "content": "x", "metadata": {"priority": 2**1100}}


@pytest.mark.parametrize(
    ("node", "payload"),
    [
        ("CONTEXT.SELECT", {"purpose": "infer", "context": {"items": [HUGE_PRIORITY]}}),
        (
            "CONTEXT.SELECT",
            {
                "purpose": "memory",
                "context": {
                    "items": [{"id": "r", "content": "x", "metadata": {"relevance": -(2**1100)}}]
                },
            },
        ),
        (
            "CONTEXT.COMPRESS",
            {
                "context": {"items": [HUGE_PRIORITY, {"id": "small", "content": "y"}]},
                "max_items": 1,
            },
        ),
        ("scoped", {}),
    ],
    ids=["select-priority", "select-relevance", "compress", "scoped-load-then-select"],
)
@pytest.mark.parametrize("context_kind", CONTEXT_STORES)
async def test_context_priority_past_the_float_range_is_refused_or_used(
    context_runtime: Ditto, node: str, payload: dict[str, Any]
) -> None:
    """Was INTERNAL_ERROR in SELECT and COMPRESS (``math.isfinite(2**1100)``: OverflowError);
    a scoped LOAD stored such an item, so every later SELECT of the scope failed."""
    if node == "scoped":
        scope = SCOPES["s1"]
        load = await context_runtime.invoke(
            "CONTEXT.LOAD", {"scope": scope, "sources": [HUGE_PRIORITY]}
        )
        if load.error is not None:
            assert load.error.code == "INVALID_INPUT", load.error
            return
        node, payload = "CONTEXT.SELECT", {"scope": scope, "purpose": "infer"}
    result = await context_runtime.invoke(node, payload)
    assert result.ok or (result.error is not None and result.error.code == "INVALID_INPUT"), (
        result.error
    )


@pytest.mark.parametrize(
    "content", [{"": complex(1, 2)}, [object()], complex(0, 1)], ids=["complex", "object", "bare"]
)
@pytest.mark.parametrize("scoped", [False, True], ids=["explicit", "scoped"])
@pytest.mark.parametrize("context_kind", CONTEXT_STORES)
async def test_context_message_with_a_non_json_value_is_invalid_input(
    context_runtime: Ditto, content: Any, scoped: bool
) -> None:
    payload: dict[str, Any] = {"sources": [{"role": "user", "content": content}]}
    if scoped:
        payload["scope"] = SCOPES["s1"]
    result = await context_runtime.invoke("CONTEXT.LOAD", payload)
    assert result.error is not None
    assert result.error.code == "INVALID_INPUT", result.error


@pytest.mark.parametrize(
    "item",
    [
        {"id": "a", "content": complex(1, 2)},
        {"id": "a", "content": "x", "metadata": {"k": object()}},
        {"id": "a", "content": b"x"},
        {"id": "a", "content": Decimal("1.5")},
    ],
    ids=["complex", "object-in-metadata", "bytes", "decimal"],
)
@pytest.mark.parametrize("context_kind", ["inprocess"])  # explicit mode: the store is not used
async def test_explicit_compress_of_a_non_json_value_is_invalid_input(
    context_runtime: Ditto, item: dict[str, Any]
) -> None:
    result = await context_runtime.invoke("CONTEXT.COMPRESS", {"context": {"items": [item]}})
    assert result.error is not None, result.output
    assert result.error.code == "INVALID_INPUT", result.error
