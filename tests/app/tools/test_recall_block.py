"""Recall blocks for prompts: never over their byte caps, never a split UTF-8 character."""

from __future__ import annotations

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from ditto import create_ditto
from ditto.app.tools import clip_utf8, recall_block
from workers.memory import InProcessMemoryStore, create_memory_worker

MULTIBYTE = st.text(alphabet=st.sampled_from(list("aé漢字🙂ß\u0301 ")), min_size=0, max_size=300)


@given(MULTIBYTE, st.integers(min_value=0, max_value=400))
def test_clip_keeps_whole_characters_within_the_cap(text: str, cap: int) -> None:
    clipped = clip_utf8(text, cap)
    assert len(clipped.encode("utf-8")) <= cap
    if len(text.encode("utf-8")) <= cap:
        assert clipped == text
    else:
        assert clipped == "" or (clipped.endswith("…") and text.startswith(clipped[:-1]))


@settings(max_examples=40, deadline=None)
@given(
    st.lists(MULTIBYTE, min_size=1, max_size=8),
    st.integers(min_value=8, max_value=300),
    st.integers(min_value=1, max_value=900),
    st.integers(min_value=1, max_value=6),
)
def test_blocks_respect_both_caps(
    texts: list[str], item_cap: int, total_cap: int, items: int
) -> None:
    async def render() -> str:
        worker = create_memory_worker(InProcessMemoryStore())
        async with create_ditto(workers=[worker]) as runtime:
            memories = [{"key": f"k{n}", "content": f"kiwi {text}"} for n, text in enumerate(texts)]
            (await runtime.invoke("MEMORY.WRITE", {"memories": memories})).unwrap()
            return await recall_block(
                runtime,
                "kiwi",
                max_items=items,
                max_item_bytes=item_cap,
                max_total_bytes=total_cap,
                min_relevance=None,
            )

    block = anyio.run(render)
    assert len(block.encode("utf-8")) <= total_cap
    lines = block.split("\n") if block else []
    assert len(lines) <= items + 1
    for line in lines[1:]:
        assert len(line.encode("utf-8")) <= item_cap
    if block:
        assert lines[0] == "[Memory context]"
