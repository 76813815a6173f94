"""The corpus provider: files cut into chunks of whole paragraphs, ids stable from path and
chunk, the folder read again on ``reload``, and a folder it cannot serve said so."""

from __future__ import annotations

from pathlib import Path

import pytest

from ditto import create_ditto
from ditto.errors import ErrorCode
from tests.workers.retrieval.conftest import embedder
from workers.retrieval import CorpusProvider, create_retrieval_worker
from workers.retrieval.providers.corpus import chunk_text

pytestmark = pytest.mark.anyio


def test_chunks_keep_paragraphs_whole_when_they_fit() -> None:
    text = "one two three\n\nfour five\n\n\n six seven\neight nine"
    assert chunk_text(text, 5) == ["one two three\n\nfour five", "six seven\neight nine"]


def test_a_long_paragraph_is_cut_between_words_after_its_heading() -> None:
    words = [f"w{n}" for n in range(40)]
    chunks = chunk_text("# Title\n\n" + " ".join(words) + "\n\nend", 16)
    assert [len(chunk.split()) for chunk in chunks] == [16, 16, 11]
    assert chunks[0].startswith("# Title\n\nw0 w1")
    assert " ".join(chunks).split() == ["#", "Title", *words, "end"]


def test_blank_text_has_no_chunks() -> None:
    assert chunk_text("\n\n   \n", 16) == []


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "corpus"
    (folder / "guides").mkdir(parents=True)
    (folder / ".git").mkdir()
    (folder / "guides" / "kites.md").write_text(
        "# Red kites\n\n" + "The red kite nests in old oak woods. " * 20 + "\n\nVoles are prey.\n"
    )
    (folder / "notes.txt").write_text("Buzzards circle over the fields.\n")
    (folder / "image.png").write_bytes(b"\x89PNG not text")
    (folder / ".git" / "HEAD.md").write_text("red kite in a hidden folder\n")
    return folder


async def _search(provider: CorpusProvider, query: str, **request: object) -> list[str]:
    async with create_ditto(workers=[create_retrieval_worker({"c": provider})]) as runtime:
        result = await runtime.invoke(
            "RETRIEVAL.SEARCH", {"query": {"content": query}, "target": {"name": "c"}, **request}
        )
    return [candidate.id for candidate in result.unwrap().candidates]


async def test_ids_are_path_and_chunk_and_metadata_says_where(tmp_path: Path) -> None:
    provider = CorpusProvider(_folder(tmp_path), chunk_words=64)
    async with create_ditto(workers=[create_retrieval_worker({"c": provider})]) as runtime:
        output = (
            await runtime.invoke(
                "RETRIEVAL.SEARCH",
                {"query": {"content": "voles"}, "target": {"name": "c"}, "strategy": "keyword"},
            )
        ).unwrap()
    (candidate,) = output.candidates
    assert candidate.id == "guides/kites.md#2"
    assert candidate.content.endswith("oak woods.\n\nVoles are prey.")
    assert candidate.metadata == {
        "path": "guides/kites.md",
        "folder": "guides",
        "chunk": 2,
        "title": "Red kites",
    }
    assert provider.size == 4  # three chunks of kites.md, one of notes.txt; no hidden file
    assert candidate.source is not None
    assert candidate.source.ref == candidate.id


async def test_hidden_folders_and_other_files_are_not_the_corpus(tmp_path: Path) -> None:
    provider = CorpusProvider(_folder(tmp_path))
    assert await _search(provider, "hidden folder png", strategy="keyword") == []


async def test_reload_reads_the_folder_again_with_the_same_ids(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    provider = CorpusProvider(folder, embedder())
    before = await _search(provider, "oak woods", strategy="keyword")
    (folder / "owls.md").write_text("Tawny owls also nest in oak woods.\n")
    assert await _search(provider, "tawny owls", strategy="keyword") == []
    await provider.reload()
    assert await _search(provider, "tawny owls", strategy="keyword") == ["owls.md#0"]
    assert (await _search(provider, "oak woods", strategy="keyword", limit=1)) == before[:1]


async def test_the_memory_pipeline_options_apply(tmp_path: Path) -> None:
    provider = CorpusProvider(_folder(tmp_path), embedder())
    async with create_ditto(workers=[create_retrieval_worker({"c": provider})]) as runtime:
        output = (
            await runtime.invoke(
                "RETRIEVAL.SEARCH",
                {
                    "query": {"content": "red kite oak"},
                    "target": {"name": "c"},
                    "strategy": "hybrid",
                    "options": {"explain": True, "rerank": "mmr", "fusion": "rrf"},
                },
            )
        ).unwrap()
    explain = output.candidates[0].metadata["explain"]
    assert explain["fusion"] == "rrf"
    assert explain["reranker"] == "mmr"


@pytest.mark.parametrize("broken", ["missing", "not-utf8"])
async def test_a_folder_it_cannot_serve_is_provider_unavailable(
    tmp_path: Path, broken: str
) -> None:
    folder = tmp_path / "corpus"
    if broken == "not-utf8":
        folder.mkdir()
        (folder / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    provider = CorpusProvider(folder)
    async with create_ditto(workers=[create_retrieval_worker({"c": provider})]) as runtime:
        result = await runtime.invoke(
            "RETRIEVAL.SEARCH", {"query": {"content": "cafe"}, "target": {"name": "c"}}
        )
    assert result.error is not None
    assert result.error.code == ErrorCode.RETRIEVAL_PROVIDER_UNAVAILABLE
    assert str(tmp_path) not in result.error.message  # names the file, never the whole path
