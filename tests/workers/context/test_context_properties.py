"""Property tests: every store gives the same contexts for the same calls, and no input crashes
a node."""

from __future__ import annotations

from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ditto import create_ditto
from tests.services import RedisSpace
from tests.workers.context.conftest import FakeClock, make_store
from workers.context import ContextPolicy, create_context_worker

NODES = ["CONTEXT.LOAD", "CONTEXT.SELECT", "CONTEXT.UPDATE", "CONTEXT.COMPRESS"]
ALLOWED = {
    "INVALID_INPUT",
    "INLINE_LIMIT_EXCEEDED",
    "ITEM_LIMIT_EXCEEDED",
    "DUPLICATE_ITEM",
    "MISSING_ITEM",
    "BUDGET_UNSATISFIABLE",
    "CONTEXT_NOT_FOUND",
    "STATE_CONFLICT",
    "STRATEGY_UNAVAILABLE",
    "RESOLVER_UNAVAILABLE",
}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=6,
)
metadata = st.fixed_dictionaries(
    {},
    optional={
        "protected": st.booleans(),
        "call_id": st.sampled_from(["c1", "c2", ""]),
        "priority": st.integers(-2, 3) | st.floats(allow_nan=True),
        "role": st.sampled_from(["system", "user"]),
        "current_goal": st.booleans() | st.just(1),
        "retrievable": st.booleans(),
    },
)
items = st.fixed_dictionaries(
    {"id": st.sampled_from(["a", "b", "c", "d", "e"]), "content": json_values},
    optional={"metadata": metadata},
)
scope = st.fixed_dictionaries({"session_id": st.sampled_from(["s1", "s2"])})

operation = st.one_of(
    st.fixed_dictionaries(
        {"node": st.just("CONTEXT.LOAD"), "scope": scope, "sources": st.lists(items, max_size=4)}
    ),
    st.fixed_dictionaries(
        {
            "node": st.just("CONTEXT.UPDATE"),
            "scope": scope,
            "remove_ids": st.lists(st.sampled_from("abcdez"), max_size=2),
            "add": st.lists(items, max_size=3),
        }
    ),
    st.fixed_dictionaries(
        {"node": st.just("CONTEXT.COMPRESS"), "scope": scope, "max_items": st.integers(0, 5)}
    ),
    st.fixed_dictionaries(
        {
            "node": st.just("CONTEXT.SELECT"),
            "scope": scope,
            "purpose": st.sampled_from(["infer", "memory"]),
            "limit": st.integers(0, 5),
            "query": st.text(max_size=10),
        }
    ),
)


def _observe(result: Any) -> Any:
    if not result.ok:
        return ("failed", result.error.code)
    output = msgspec.to_builtins(result.output)
    output.get("context", output).pop("version", None)  # versions are random by design
    return ("ok", output)


@pytest.mark.redis
@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,  # the same examples on every machine and every run
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(operations=st.lists(operation, max_size=10))
def test_random_sequences_give_identical_contexts_on_every_store(
    redis_space: RedisSpace, operations: list[dict[str, Any]]
) -> None:
    policy = ContextPolicy(max_items=4, max_inline_bytes=80)

    async def on(kind: str) -> list[Any]:
        # Nothing may expire during a sequence: Redis counts real time (a loaded machine took
        # longer than the harness's short TTL), the in-process store counts the fake clock.
        store = make_store(kind, FakeClock(), redis_space, ttl_ms=600_000)
        observed = []
        try:
            async with create_ditto(
                workers=[create_context_worker(store=store, policy=policy)]
            ) as rt:
                for scope_id in ("s1", "s2"):  # start clean: earlier examples share the prefix
                    await rt.invoke(
                        "CONTEXT.LOAD", {"scope": {"session_id": scope_id}, "sources": []}
                    )
                for op in operations:
                    payload = {key: value for key, value in op.items() if key != "node"}
                    observed.append(_observe(await rt.invoke(op["node"], payload)))
                for scope_id in ("s1", "s2"):
                    final = await rt.invoke("CONTEXT.LOAD", {"scope": {"session_id": scope_id}})
                    observed.append(_observe(final))
        finally:
            await store.aclose()
        return observed

    async def main() -> None:
        assert await on("inprocess") == await on("redis")

    anyio.run(main)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    node=st.sampled_from(NODES),
    payload=json_values
    | st.dictionaries(
        st.sampled_from(
            [
                "context",
                "scope",
                "sources",
                "purpose",
                "add",
                "ingress",
                "remove_ids",
                "limit",
                "max_tokens",
                "max_items",
                "strategy",
                "query",
                "expected_version",
                "resolve_references",
            ]
        ),
        json_values
        | st.just({"items": [{"id": "a", "content": 1}]})
        | st.just({"session_id": "s"})
        | st.lists(items, max_size=3),
        max_size=5,
    ),
)
def test_random_inputs_never_crash_a_node(node: str, payload: Any) -> None:
    async def main() -> None:
        from workers.context import InProcessContextStore

        async with create_ditto(
            workers=[create_context_worker(store=InProcessContextStore())]
        ) as rt:
            result = await rt.invoke(node, payload)
        assert result.status in ("success", "failed")
        if not result.ok:
            assert result.error.code in ALLOWED, result.error

    anyio.run(main)
