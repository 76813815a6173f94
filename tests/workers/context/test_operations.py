"""CONTEXT operations in explicit mode: the reference's ids, examples and rules."""

from __future__ import annotations

from typing import Any

import pytest

from ditto import ErrorCode, InvalidInputError, NodeContext, create_ditto
from workers.context import (
    ContextPolicy,
    ContextScope,
    ContextServices,
    InProcessContextStore,
    create_context_worker,
    scope_key,
    stable_id,
)
from workers.context.canonical import js_json
from workers.context.contracts import CompressInput, Context, Reference, SelectInput

pytestmark = pytest.mark.anyio


async def run(node: str, payload: Any, **worker: Any) -> Any:
    async with create_ditto(workers=[create_context_worker(**worker)]) as runtime:
        return await runtime.invoke(node, payload)


def code_of(result: Any) -> str | None:
    return result.error.code if result.error is not None else None


def ids(result: Any) -> list[str]:
    return [item.id for item in result.unwrap().items]


# ------------------------------------------------------------------------------ ids


def test_hash_test_vectors_reproduce_byte_for_byte() -> None:
    assert stable_id("message", {"role": "user", "content": "hello"}) == (
        "message:f4f7e767b9a1966921d93f1818bb0238c1633ed715f29a789b4e3a624ab16512"
    )
    assert stable_id("reference", {"uri": "file:policy"}) == (
        "reference:3488e3a13aa650eceecef2ad12437285c20f26f218cc56243364c744b2c4e2a7"
    )
    assert stable_id("reference", {"uri": "urn:document", "mediaType": "text/plain"}) == (
        "reference:005e67f496d05c593e1b657d362fe893d1531ca9f8ecc2c6af0232e2dab24ac7"
    )
    assert scope_key("one", None, None) == (
        "scope:914a1252e18b261eb84f77670747e71650b824198953cb8da2d89fa869969887"
    )
    assert scope_key("tenant-a:session-1", "turn-1", None) == (
        "scope:58fadde8d98b219c354b0fe7b0faa9fd373c17429cf2cd446d9549664d07c6d8"
    )
    assert InProcessContextStore.key(ContextScope(session_id="one")) == scope_key("one", None, None)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1.0, "1"),
        (-0.0, "0"),
        (1e16, "10000000000000000"),
        (1e-7, "1e-7"),
        (1e21, "1e+21"),
        (0.000001, "0.000001"),
        (1.5e-7, "1.5e-7"),
        (0.1, "0.1"),
        (-2.5, "-2.5"),
        (1.2345e25, "1.2345e+25"),
        ({"b": 1, "a": [True, None]}, '{"a":[true,null],"b":1}'),
        ({"\ue000": 1, "\U0001f600": 2}, '{"\U0001f600":2,"\ue000":1}'),  # UTF-16 order
        ("\ud800", '"\\ud800"'),
        ("é\n\x01", '"é\\n\\u0001"'),
    ],
)
def test_canonical_json_matches_javascript(value: Any, expected: str) -> None:
    assert js_json(value, sort_keys=True) == expected


# ------------------------------------------------------------------------------ LOAD


async def test_load_derives_stable_ids_from_sources() -> None:
    result = await run(
        "CONTEXT.LOAD",
        {
            "sources": [
                {"role": "user", "content": "hello"},
                {"uri": "file:policy"},
                {"id": "note", "content": "kept as given", "metadata": {"k": 1}},
                {"role": "system", "content": "be brief", "name": "rules"},
            ]
        },
    )
    first, reference, note, system = result.unwrap().items
    assert first.id == stable_id("message", {"role": "user", "content": "hello"})
    assert first.metadata == {"source_type": "message", "role": "user"}
    assert reference.id == stable_id("reference", {"uri": "file:policy"})
    assert reference.source == Reference("file:policy")
    assert reference.content == [{"type": "reference", "reference": {"uri": "file:policy"}}]
    assert (note.id, note.content, note.metadata) == ("note", "kept as given", {"k": 1})
    assert system.metadata == {"source_type": "message", "role": "system", "name": "rules"}


@pytest.mark.parametrize(
    ("duplicate", "expected"),
    [("replace", ["a", "b"]), ("keep-first", ["a", "b"]), ("reject", None)],
)
async def test_duplicate_policy(duplicate: str, expected: list[str] | None) -> None:
    sources = [{"id": "a", "content": 1}, {"id": "b", "content": 2}, {"id": "a", "content": 3}]
    result = await run(
        "CONTEXT.LOAD",
        {"sources": sources},
        policy=ContextPolicy(duplicate=duplicate),  # type: ignore[arg-type]
    )
    if expected is None:
        assert code_of(result) == "DUPLICATE_ITEM"
        return
    assert ids(result) == expected
    contents = [item.content for item in result.unwrap().items]
    assert contents == ([3, 2] if duplicate == "replace" else [1, 2])  # replace keeps position


async def test_load_input_and_limit_errors() -> None:
    bad = await run("CONTEXT.LOAD", {"sources": [None]})
    assert code_of(bad) == "INVALID_INPUT"
    assert "sources[0] must be an object" in bad.error.message
    big = {"id": "big", "content": "x" * 100}
    assert (
        code_of(
            await run("CONTEXT.LOAD", {"sources": [big]}, policy=ContextPolicy(max_inline_bytes=50))
        )
        == "INLINE_LIMIT_EXCEEDED"
    )
    referenced = {**big, "source": {"uri": "file:big"}}
    assert (
        await run(
            "CONTEXT.LOAD", {"sources": [referenced]}, policy=ContextPolicy(max_inline_bytes=50)
        )
    ).ok
    many = [{"id": str(n), "content": n} for n in range(3)]
    assert (
        code_of(await run("CONTEXT.LOAD", {"sources": many}, policy=ContextPolicy(max_items=2)))
        == "ITEM_LIMIT_EXCEEDED"
    )
    assert code_of(
        await run("CONTEXT.LOAD", {"sources": [{"id": "n", "content": float("nan")}]})
    ) == ("INVALID_INPUT")


class Resolver:
    def __init__(self, text: str) -> None:
        self.text = text
        self.calls: list[str] = []

    async def resolve(self, reference: Reference, ctx: NodeContext) -> Any:
        self.calls.append(reference.uri)
        return self.text


async def test_reference_resolution_rules() -> None:
    source = {"uri": "file:policy"}
    assert code_of(
        await run("CONTEXT.LOAD", {"sources": [source], "resolve_references": True})
    ) == ("RESOLVER_UNAVAILABLE")
    resolver = Resolver("the policy text")
    services = ContextServices(reference_resolver=resolver)
    unresolved = await run("CONTEXT.LOAD", {"sources": [source]}, services=services)
    assert resolver.calls == []
    resolved = (
        await run(
            "CONTEXT.LOAD",
            {"sources": [source, {"role": "user", "content": "hi"}], "resolve_references": True},
            services=services,
        )
    ).unwrap()
    assert resolver.calls == ["file:policy"]  # messages are never resolved
    assert resolved.items[0].id == unresolved.unwrap().items[0].id
    assert resolved.items[0].content == "the policy text"
    assert resolved.items[0].source == Reference("file:policy")
    oversized = ContextServices(reference_resolver=Resolver("y" * 100))
    result = await run(
        "CONTEXT.LOAD",
        {"sources": [source], "resolve_references": True},
        services=oversized,
        policy=ContextPolicy(max_inline_bytes=50),
    )
    assert code_of(result) == "INLINE_LIMIT_EXCEEDED"


# ------------------------------------------------------------------------------ UPDATE


async def test_update_removes_then_adds_then_takes_ingress() -> None:
    context = {"items": [{"id": "a", "content": "A"}, {"id": "b", "content": "B"}]}
    update = {
        "context": context,
        "remove_ids": ["a"],
        "add": [{"id": "a", "content": "A2"}],
        "ingress": [
            {
                "id": "b",
                "source_node": "MEMORY.SEARCH",
                "content": "B2",
                "metadata": {"score": 0.9, "source_node": "spoofed"},
            }
        ],
    }
    first = (await run("CONTEXT.UPDATE", update)).unwrap()
    assert [item.id for item in first.items] == ["b", "a"]
    assert first.items[0].metadata == {"score": 0.9, "source_node": "MEMORY.SEARCH"}
    again = (
        await run(
            "CONTEXT.UPDATE",
            {
                **update,
                "context": {
                    "items": [
                        {
                            "id": i.id,
                            "content": i.content,
                            **({"metadata": i.metadata} if i.metadata else {}),
                        }
                        for i in first.items
                    ]
                },
                "remove_ids": [],
            },
        )
    ).unwrap()
    assert again == first  # re-applying is idempotent


async def test_update_rules() -> None:
    context = {"items": [{"id": "a", "content": 1}]}
    missing = {"context": context, "remove_ids": ["zzz"]}
    assert (await run("CONTEXT.UPDATE", missing)).ok
    assert (
        code_of(
            await run("CONTEXT.UPDATE", missing, policy=ContextPolicy(missing_removal="reject"))
        )
        == "MISSING_ITEM"
    )
    bad_node = {"context": context, "ingress": [{"id": "x", "source_node": "nodots", "content": 1}]}
    assert code_of(await run("CONTEXT.UPDATE", bad_node)) == "INVALID_INPUT"
    duplicated = {"context": {"items": [{"id": "a", "content": 1}, {"id": "a", "content": 2}]}}
    assert code_of(await run("CONTEXT.UPDATE", duplicated)) == "INVALID_INPUT"
    grow = {"context": context, "add": [{"id": "b", "content": 2}]}
    assert code_of(await run("CONTEXT.UPDATE", grow, policy=ContextPolicy(max_items=1))) == (
        "ITEM_LIMIT_EXCEEDED"
    )
    assert code_of(await run("CONTEXT.UPDATE", {"add": []})) == "INVALID_INPUT"  # no context


# ------------------------------------------------------------------------------ SELECT

REFERENCE_ITEMS = [
    {"id": "system", "content": "system rules", "metadata": {"role": "system", "protected": True}},
    {"id": "match", "content": "typescript context worker"},
    {
        "id": "private",
        "content": "typescript secret",
        "metadata": {"private": True, "memory_candidate": True},
    },
    {
        "id": "memory",
        "content": "reusable fact",
        "metadata": {"memory_candidate": True, "reusable": True},
    },
]


class LengthEstimator:
    def __init__(self) -> None:
        self.calls = 0

    def estimate(self, content: Any) -> int:
        self.calls += 1
        return len(str(content))


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        ({"purpose": "infer", "query": "typescript", "limit": 2}, ["system", "private"]),
        ({"purpose": "memory", "limit": 4}, ["memory", "match", "system"]),
        ({"purpose": "infer", "limit": 0}, []),
        ({"purpose": "infer", "max_tokens": 1}, []),
    ],
)
async def test_default_select_reproduces_the_reference_examples(
    request_: dict[str, Any], expected: list[str]
) -> None:
    services = ContextServices(token_estimator=LengthEstimator())
    result = await run(
        "CONTEXT.SELECT", {"context": {"items": REFERENCE_ITEMS}, **request_}, services=services
    )
    selection = result.unwrap()
    assert selection.selected_item_ids == expected
    assert [item.id for item in selection.context.items] == expected


async def test_tokens_are_not_estimated_without_a_budget() -> None:
    estimator = LengthEstimator()
    await run(
        "CONTEXT.SELECT",
        {"context": {"items": REFERENCE_ITEMS}, "purpose": "infer"},
        services=ContextServices(token_estimator=estimator),
    )
    assert estimator.calls == 0


async def test_a_budget_skips_items_that_do_not_fit_and_keeps_going() -> None:
    items = [
        {"id": "long", "content": "x" * 40, "metadata": {"priority": 2}},
        {"id": "short", "content": "y", "metadata": {"priority": 1}},
    ]
    result = await run(
        "CONTEXT.SELECT", {"context": {"items": items}, "purpose": "infer", "max_tokens": 3}
    )
    assert result.unwrap().selected_item_ids == ["short"]


async def test_requests_tighten_but_never_relax_the_policy() -> None:
    items = [{"id": str(n), "content": n} for n in range(5)]
    relaxed = await run(
        "CONTEXT.SELECT",
        {"context": {"items": items}, "purpose": "infer", "limit": 5},
        policy=ContextPolicy(max_items=2),
    )
    assert len(relaxed.unwrap().selected_item_ids) == 2


class Selector:
    def __init__(self, output: Any) -> None:
        self.output = output

    async def select(self, input: SelectInput, ctx: NodeContext) -> Any:
        return self.output


async def test_custom_selectors_are_validated_and_deduplicated() -> None:
    payload = {
        "context": {"items": []},
        "purpose": "infer",
        "strategy": {"kind": "provider", "name": "mine"},
    }
    assert code_of(await run("CONTEXT.SELECT", payload)) == "STRATEGY_UNAVAILABLE"
    rag = {**payload, "strategy": {"kind": "rag"}}
    assert code_of(await run("CONTEXT.SELECT", rag)) == "STRATEGY_UNAVAILABLE"
    good = Selector(
        [{"id": "x", "content": 1}, {"id": "x", "content": 2}, {"id": "y", "content": 3}]
    )
    result = await run("CONTEXT.SELECT", payload, services=ContextServices(selector=good))
    assert result.unwrap().selected_item_ids == ["x", "y"]
    assert result.unwrap().context.items[0].content == 1  # first wins
    for garbage in ("not a list", [{"no": "id"}], [{"id": "z", "content": float("inf")}]):
        bad = await run(
            "CONTEXT.SELECT", payload, services=ContextServices(selector=Selector(garbage))
        )
        assert code_of(bad) == "INVALID_PROVIDER_OUTPUT", garbage


# ------------------------------------------------------------------------------ COMPRESS

TOOL_ITEMS = [
    {"id": "system", "content": "rules", "metadata": {"role": "system"}},
    {"id": "tool-call", "content": "call", "metadata": {"call_id": "call-1"}},
    {"id": "tool-result", "content": "result", "metadata": {"call_id": "call-1"}},
    {"id": "recent", "content": "latest", "metadata": {"priority": 1}},
]


async def test_deterministic_compress_reproduces_the_reference_example() -> None:
    result = await run("CONTEXT.COMPRESS", {"context": {"items": TOOL_ITEMS}, "max_items": 2})
    assert ids(result) == ["system", "recent"]
    assert (
        code_of(await run("CONTEXT.COMPRESS", {"context": {"items": TOOL_ITEMS}, "max_items": 0}))
        == "BUDGET_UNSATISFIABLE"
    )
    untouched = await run("CONTEXT.COMPRESS", {"context": {"items": TOOL_ITEMS}})
    assert ids(untouched) == [item["id"] for item in TOOL_ITEMS]


async def test_compress_by_tokens_drops_whole_groups() -> None:
    result = await run("CONTEXT.COMPRESS", {"context": {"items": TOOL_ITEMS}, "max_tokens": 6})
    kept = ids(result)
    assert "system" in kept
    assert ("tool-call" in kept) == ("tool-result" in kept)


class Compressor:
    def __init__(self, output: Any) -> None:
        self.output = output

    async def compress(self, input: CompressInput, ctx: NodeContext) -> Any:
        return self.output


@pytest.mark.parametrize(
    ("output", "code"),
    [
        ({"items": []}, "INVALID_PROVIDER_OUTPUT"),  # dropped the protected system item
        ({"items": [TOOL_ITEMS[0], {"id": "new", "content": 1}]}, "INVALID_PROVIDER_OUTPUT"),
        ({"items": [TOOL_ITEMS[0], TOOL_ITEMS[1]]}, "INVALID_PROVIDER_OUTPUT"),  # split call-1
        ({"items": [TOOL_ITEMS[0], TOOL_ITEMS[0]]}, "INVALID_PROVIDER_OUTPUT"),
        ("nonsense", "INVALID_PROVIDER_OUTPUT"),
        (
            {"items": [TOOL_ITEMS[0], TOOL_ITEMS[3], TOOL_ITEMS[1], TOOL_ITEMS[2]]},
            "INVALID_PROVIDER_OUTPUT",
        ),  # over max_items
        ({"items": [{**TOOL_ITEMS[0], "content": "z" * 100}]}, "INLINE_LIMIT_EXCEEDED"),
    ],
)
async def test_compressor_output_is_checked(output: Any, code: str) -> None:
    result = await run(
        "CONTEXT.COMPRESS",
        {"context": {"items": TOOL_ITEMS}, "max_items": 3},
        services=ContextServices(compressor=Compressor(output)),
        policy=ContextPolicy(max_inline_bytes=60),
    )
    assert code_of(result) == code


async def test_a_valid_custom_compressor_may_rewrite_content() -> None:
    output = Context([msgspec_item(TOOL_ITEMS[0], "short rules"), msgspec_item(TOOL_ITEMS[3])])
    result = await run(
        "CONTEXT.COMPRESS",
        {"context": {"items": TOOL_ITEMS}, "max_items": 2},
        services=ContextServices(compressor=Compressor(output)),
    )
    assert [item.content for item in result.unwrap().items] == ["short rules", "latest"]


def msgspec_item(raw: dict[str, Any], content: Any = None) -> Any:
    from workers.context import ContextItem

    return ContextItem(
        raw["id"], raw["content"] if content is None else content, None, raw.get("metadata")
    )


# ------------------------------------------------------------------------------ modes


async def test_explicit_mode_never_touches_the_store() -> None:
    store = InProcessContextStore()
    result = await run("CONTEXT.LOAD", {"sources": []}, store=store)
    assert result.unwrap().items == []
    assert result.unwrap().version is None
    assert await store.get(ContextScope(session_id="anything")) is None
    assert len(store._entries) == 0
    assert code_of(await run("CONTEXT.LOAD", {"sources": [], "expected_version": "v"})) == (
        "INVALID_INPUT"
    )


async def test_a_scope_without_a_store_is_state_store_unavailable() -> None:
    result = await run("CONTEXT.LOAD", {"scope": {"session_id": "s"}, "sources": []})
    assert code_of(result) == "STATE_STORE_UNAVAILABLE"


def test_a_bad_policy_fails_at_construction() -> None:
    for bad in (
        {"max_items": 0},
        {"max_inline_bytes": 1_000_001},
        {"max_tokens": True},
        {"duplicate": "merge"},
        {"missing_removal": "warn"},
    ):
        with pytest.raises(InvalidInputError, match="policy") as raised:
            ContextPolicy(**bad)  # type: ignore[arg-type]
        assert raised.value.code == ErrorCode.INVALID_INPUT


def test_numbers_beyond_two_to_the_53_print_as_javascript_does() -> None:
    assert js_json(2.0**60, sort_keys=True) == "1152921504606847000"
    assert js_json(12345678901234567891, sort_keys=True) == "12345678901234567000"
    assert js_json(2**53 - 1, sort_keys=True) == "9007199254740991"


async def test_an_explicit_load_needs_sources() -> None:
    assert code_of(await run("CONTEXT.LOAD", {})) == "INVALID_INPUT"
