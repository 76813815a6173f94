"""A handler's output is checked against its contract, also when it built the output Struct
itself (a Struct's constructor checks no types)."""

from __future__ import annotations

import msgspec
import pytest

from ditto import NodeContext, create_ditto, define_worker

pytestmark = pytest.mark.anyio


class Out(msgspec.Struct, frozen=True):
    doubled: int


async def sloppy(request: int, ctx: NodeContext) -> Out:
    return Out(doubled="sixteen")  # type: ignore[arg-type]


async def careful(request: int, ctx: NodeContext) -> Out:
    return Out(doubled=request * 2)


async def test_a_struct_output_of_the_wrong_shape_is_invalid_output() -> None:
    worker = define_worker("math", {"MATH.SLOPPY": sloppy, "MATH.CAREFUL": careful})
    async with create_ditto(workers=[worker]) as runtime:
        wrong = await runtime.invoke("MATH.SLOPPY", 8)
        right = await runtime.invoke("MATH.CAREFUL", 8)
    assert wrong.error is not None
    assert wrong.error.code == "INVALID_OUTPUT"
    assert "doubled" in wrong.error.message
    assert right.unwrap() == Out(16)


async def test_a_worker_that_trusts_its_outputs_passes_its_structs_on_unchecked() -> None:
    worker = define_worker("math", {"MATH.SLOPPY": sloppy}, trusted_outputs=True)
    async with create_ditto(workers=[worker]) as runtime:
        result = await runtime.invoke("MATH.SLOPPY", 8)
    assert result.unwrap() == Out(doubled="sixteen")  # type: ignore[arg-type]
