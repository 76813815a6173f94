"""The ``Embedder`` port, on every embedder: one unit-length float32 row per text, the same
vector for the same text (alone or in any batch), and a stable model identity.

Vectors go through :func:`embed_texts`, the checks every vector passes before it is stored.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from workers.memory.retrieval.embeddings import (
    CallableEmbedder,
    Embedder,
    HashingEmbedder,
    MiniLMEmbedder,
    embed_texts,
    model_of,
)
from workers.memory.retrieval.embeddings.e5 import E5SmallEmbedder

pytestmark = pytest.mark.anyio

SAME_VECTOR_ATOL = 1e-5
"""How far two embeddings of one text may differ, per component, and still be "the same vector".

A batch of another shape is padded differently, so BLAS sums the same products in another
order (and another CPU picks another kernel). In float32 (ε ≈ 1.2e-7) each 384-term dot
product then differs by up to ~√384·ε ≈ 2e-6 relative, compounded over MiniLM's six layers;
1e-5 on unit vectors (cosine ≥ 0.99999) still tells any two different texts apart by orders of
magnitude. Exact equality held on one machine and failed on another."""


def _character_histogram(texts: list[str]) -> list[list[float]]:
    """A deterministic stand-in for a hosted model: characters counted in 16 buckets."""
    return [
        [float(sum(ord(ch) % 16 == bucket for ch in text)) for bucket in range(16)]
        for text in texts
    ]


EMBEDDERS: dict[str, Callable[[], Embedder]] = {
    "hashing": lambda: HashingEmbedder(64),
    # Small batches, so one call spans several forward passes of differently padded texts.
    "minilm": lambda: MiniLMEmbedder(batch_size=2),
    "callable": lambda: CallableEmbedder(_character_histogram, "test/char-histogram-16", 16),
    "e5-small": lambda: E5SmallEmbedder(threads=2),
}

TEXTS = [
    "espresso",
    "the espresso machine on the third floor is broken again",
    "Tee, 緑茶 und ünïcödé 😀",
    "redis keeps the working context; postgres keeps durable memory " * 8,
    "a",
]


@pytest.fixture(params=sorted(EMBEDDERS))
def make_embedder(request: pytest.FixtureRequest) -> Callable[[], Embedder]:
    """Builds an embedder of the test's kind (call it again for a second, equal one)."""
    return EMBEDDERS[request.param]


async def test_each_text_gets_one_unit_float32_row_of_the_declared_dimension(
    make_embedder: Callable[[], Embedder],
) -> None:
    embedder = make_embedder()
    raw = np.asarray(await embedder.embed(TEXTS))
    assert raw.shape == (len(TEXTS), embedder.dimension)
    vectors = await embed_texts(embedder, TEXTS)
    assert vectors.shape == (len(TEXTS), embedder.dimension)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=0, atol=1e-5)


async def test_the_same_text_gets_the_same_vector(make_embedder: Callable[[], Embedder]) -> None:
    twice = await embed_texts(make_embedder(), [TEXTS[1], TEXTS[0], TEXTS[1]])
    again = await embed_texts(make_embedder(), [TEXTS[1]])
    np.testing.assert_allclose(twice[0], twice[2], rtol=0, atol=SAME_VECTOR_ATOL)
    np.testing.assert_allclose(twice[0], again[0], rtol=0, atol=SAME_VECTOR_ATOL)
    assert np.abs(twice[0] - twice[1]).max() > 100 * SAME_VECTOR_ATOL  # different texts differ


async def test_a_text_gets_the_same_vector_alone_or_in_a_batch(
    make_embedder: Callable[[], Embedder],
) -> None:
    embedder = make_embedder()
    batch = await embed_texts(embedder, TEXTS)
    for row, text in enumerate(TEXTS):
        (alone,) = await embed_texts(embedder, [text])
        np.testing.assert_allclose(alone, batch[row], rtol=0, atol=SAME_VECTOR_ATOL, err_msg=text)


def test_the_model_identity_is_the_same_for_every_instance_with_the_same_settings(
    make_embedder: Callable[[], Embedder],
) -> None:
    first, second = make_embedder(), make_embedder()
    assert model_of(first) == model_of(second)
