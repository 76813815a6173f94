"""A corpus is embedded once: a reload embeds only the chunks that changed, and a cache file
spares the next process every chunk it already holds — for the same model only, never a stale
vector, and a damaged file is set aside with a warning, not trusted."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from ditto import create_ditto
from ditto.app.config.retrieval_settings import RetrievalTargetSettings
from ditto.errors import ErrorCode
from workers.memory.retrieval.embeddings import HashingEmbedder
from workers.memory.retrieval.embeddings.cache import VectorCache, VectorCacheError
from workers.retrieval import CorpusProvider, create_retrieval_worker

pytestmark = pytest.mark.anyio


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "kites.md").write_text(
        "# Red kites\n\nThe red kite nests in old oak woods.\n\nVoles are its prey.\n"
    )
    (folder / "owls.md").write_text("# Owls\n\nTawny owls hunt at night.\n")
    (folder / "notes.txt").write_text("Buzzards circle over the fields.\n")
    return folder


async def _vector_hits(provider: CorpusProvider, query: str) -> list[tuple[str, float]]:
    async with create_ditto(workers=[create_retrieval_worker({"c": provider})]) as runtime:
        result = await runtime.invoke(
            "RETRIEVAL.SEARCH",
            {"query": {"content": query}, "target": {"name": "c"}, "strategy": "vector"},
        )
    return [(hit.id, hit.score) for hit in result.unwrap().candidates]


async def test_a_reload_embeds_only_the_chunks_that_changed(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    provider = CorpusProvider(folder, HashingEmbedder(64), chunk_words=16)
    await provider.open()
    assert provider.vectors.embedded == provider.size == 3
    (folder / "owls.md").write_text("# Owls\n\nBarn owls nest in old barns.\n")
    await provider.reload()
    assert provider.vectors.embedded == 1
    hits = await _vector_hits(provider, "barn owls nest in barns")
    assert hits[0][0] == "owls.md#0"
    await provider.reload()  # nothing changed: nothing embedded
    assert provider.vectors.embedded == 0


async def test_a_cache_file_spares_the_next_process_the_chunks_it_holds(tmp_path: Path) -> None:
    folder, cache = _folder(tmp_path), tmp_path / "cache" / "corpus.sqlite"
    first = CorpusProvider(folder, HashingEmbedder(64), cache=cache)
    expected = await _vector_hits(first, "red kite oak woods")
    assert first.vectors.embedded == 3
    assert cache.is_file()
    (folder / "notes.txt").write_text("Buzzards and kestrels circle over the fields.\n")
    second = CorpusProvider(folder, HashingEmbedder(64), cache=cache)
    unchanged = [hit for hit in expected if not hit[0].startswith("notes.txt")]
    got = await _vector_hits(second, "red kite oak woods")
    assert [hit for hit in got if not hit[0].startswith("notes.txt")] == unchanged
    assert second.vectors.embedded == 1  # only the changed file


async def test_vectors_of_another_model_are_never_used(tmp_path: Path) -> None:
    folder, cache = _folder(tmp_path), tmp_path / "vectors.sqlite"
    await CorpusProvider(folder, HashingEmbedder(64), cache=cache).open()
    other = CorpusProvider(folder, HashingEmbedder(32), cache=cache)
    await other.open()
    assert other.vectors.embedded == 3
    again = CorpusProvider(folder, HashingEmbedder(64), cache=cache)
    await again.open()
    assert again.vectors.embedded == 0  # both models' vectors are kept side by side


async def test_cached_vectors_equal_freshly_computed_ones(tmp_path: Path) -> None:
    cache = VectorCache(tmp_path / "v.sqlite")
    texts = ["red kite", "tawny owl", "red kite"]  # a repeated text is embedded once
    first = await cache.embed(HashingEmbedder(48), texts)
    assert cache.embedded == 2
    again = await VectorCache(tmp_path / "v.sqlite").embed(HashingEmbedder(48), texts)
    assert again.dtype == np.float32
    np.testing.assert_array_equal(first, again)
    assert (await VectorCache().embed(HashingEmbedder(48), [])).shape == (0, 48)


async def test_a_damaged_cache_file_is_set_aside_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder, cache = _folder(tmp_path), tmp_path / "vectors.sqlite"
    cache.write_bytes(b"this is not a SQLite database, just some bytes" * 100)
    provider = CorpusProvider(folder, HashingEmbedder(64), cache=cache)
    with caplog.at_level(logging.WARNING, logger="ditto.workers.memory.vector_cache"):
        await provider.open()
    assert provider.vectors.embedded == 3
    assert "vectors.sqlite.damaged" in caplog.text
    assert (tmp_path / "vectors.sqlite.damaged").read_bytes().startswith(b"this is not")
    again = CorpusProvider(folder, HashingEmbedder(64), cache=cache)
    await again.open()
    assert again.vectors.embedded == 0


async def test_a_cache_that_cannot_be_written_is_provider_unavailable(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    cache = VectorCache(tmp_path / "a-file" / "vectors.sqlite")
    with pytest.raises(VectorCacheError) as raised:
        await cache.embed(HashingEmbedder(16), ["red kite"])
    assert raised.value.code == ErrorCode.STORE_UNAVAILABLE
    assert str(tmp_path) not in str(raised.value)
    folder = _folder(tmp_path)
    provider = CorpusProvider(folder, HashingEmbedder(16), cache=cache.path)
    async with create_ditto(workers=[create_retrieval_worker({"c": provider})]) as runtime:
        result = await runtime.invoke(
            "RETRIEVAL.SEARCH", {"query": {"content": "kite"}, "target": {"name": "c"}}
        )
    assert result.error is not None
    assert result.error.code == ErrorCode.RETRIEVAL_PROVIDER_UNAVAILABLE
    assert "vectors.sqlite" in result.error.message
    assert str(tmp_path) not in result.error.message


def test_only_a_corpus_target_takes_a_cache() -> None:
    assert RetrievalTargetSettings(kind="corpus", path="docs", cache="c.sqlite").cache
    with pytest.raises(ValueError, match="corpus target's setting"):
        RetrievalTargetSettings(kind="memory", cache="c.sqlite")
