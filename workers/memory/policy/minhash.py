"""MinHash signatures of memory texts' terms: the scheme, its serialised form, and the same
signatures for many texts at once.

The scheme (chosen and measured in :mod:`.similarity`'s notes): shingles are the canonical
terms and their adjacent pairs, each hashed once (64 bits); *one-permutation hashing* puts a
shingle in one of :data:`BINS` bins by its top bits, a bin keeps the minimum of the low 32
bits, and an empty bin borrows a filled one along a fixed probe sequence (optimal
densification). No Python ``hash()`` (salted per process) and no unseeded randomness: a
signature is the same on every run and machine, so it can be stored.

:func:`signatures` computes many at once with numpy and returns exactly what
:func:`signature_of` returns for each: the terms are hashed one by one (cached per term), then
the pair hashes, the bin minima and the densification are array operations. A batch write
pays about a microsecond per text for them instead of ten.
"""

from __future__ import annotations

import base64
import hashlib
import random
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from itertools import chain, pairwise
from operator import eq
from typing import Any

import numpy as np

__all__ = ("BANDS", "BINS", "Signature", "estimate_similarity", "signature_of", "signatures")

BINS = 32
"""MinHash values per signature (one-permutation bins)."""
BANDS = 16
"""LSH bands; each holds ``BINS // BANDS`` values."""

_MASK = (1 << 64) - 1
_SHIFT = 64 - (BINS - 1).bit_length()
_MIX_A = 0x9E3779B97F4A7C15
_MIX_B = 0xC2B2AE3D27D4EB4F
_EMPTY = 1 << 32
_VERSION = 1
_FORMAT = struct.Struct(f"<B{BINS}I")
_BATCH = 12
"""From this many texts on, :func:`signatures` uses arrays (below it, their set-up costs more
than the loop it saves)."""


def _probes() -> tuple[tuple[int, ...], ...]:
    """For each bin, a fixed order of bins to borrow from when it is empty (densification)."""
    rng = random.Random(0x25D17)  # a constant seed: signatures must never change between runs
    return tuple(tuple(rng.randrange(BINS) for _ in range(4 * BINS)) for _ in range(BINS))


_PROBES = _probes()


@cache
def _borrowing() -> tuple[np.ndarray[Any, np.dtype[np.uint64]], np.ndarray[Any, np.dtype[np.intp]]]:
    """Tables that find, for every slot at once, the first filled bin of its probe order.

    A slot's probe order, repeats dropped, is a permutation of (some of) the bins. Each text's
    filled bins, as 4 bytes, map through ``table[byte, slot, value]`` to a mask whose bit
    ``i`` says the ``i``-th bin of that slot's order is filled; the lowest set bit is the bin
    the walk in :func:`signature_of` stops at, ``order[slot, i]`` (no bit: no probe is
    filled). Built on the first batch (a few milliseconds), not at import.
    """
    table = np.zeros((4, BINS, 256), np.uint64)
    order = np.zeros((BINS, BINS), np.intp)
    values = np.arange(256, dtype=np.uint64)
    for slot, probes in enumerate(_PROBES):
        for place, probe in enumerate(dict.fromkeys(probes)):
            order[slot, place] = probe
            byte, bit = divmod(probe, 8)
            table[byte, slot] |= ((values >> np.uint64(bit)) & np.uint64(1)) << np.uint64(place)
    return table, order


class _TermHashes(dict[str, int]):
    """Each term's 64-bit hash (BLAKE2b), kept: ``hashes[term]``. A plain dict look-up, not an
    ``lru_cache`` call, because it runs once per term signed; emptied when it holds
    :data:`_HASHES_KEPT` terms (a few MB), so it stays bounded without tracking use."""

    __slots__ = ()

    def __missing__(self, found: str) -> int:
        if len(self) >= _HASHES_KEPT:
            self.clear()
        value = int.from_bytes(hashlib.blake2b(found.encode(), digest_size=8).digest(), "little")
        self[found] = value
        return value


_HASHES_KEPT = 65536
_term_hashes = _TermHashes()
_term_hash = _term_hashes.__getitem__


@dataclass(frozen=True, slots=True)
class Signature:
    """A MinHash signature of one text: ``BINS`` 32-bit values.

    Serialise with :meth:`to_bytes` / :meth:`to_str`; both carry a format version byte.
    """

    values: tuple[int, ...]
    """The densified bin minima, ``BINS`` of them."""

    def to_bytes(self) -> bytes:
        """The compact binary form (1 + 4 * ``BINS`` bytes)."""
        return _FORMAT.pack(_VERSION, *self.values)

    def to_str(self) -> str:
        """The binary form as URL-safe base64, for a text column or JSON."""
        return base64.urlsafe_b64encode(self.to_bytes()).decode("ascii")

    @classmethod
    def from_bytes(cls, data: bytes) -> Signature:
        """Read :meth:`to_bytes` back.

        Raises:
            ValueError: ``data`` is not a signature of this format version.
        """
        if len(data) != _FORMAT.size or data[0] != _VERSION:
            raise ValueError("not a version-1 MinHash signature")
        return cls(_FORMAT.unpack(data)[1:])

    @classmethod
    def from_str(cls, text: str) -> Signature:
        """Read :meth:`to_str` back.

        Raises:
            ValueError: ``text`` is not a signature of this format version.
        """
        return cls.from_bytes(base64.urlsafe_b64decode(text.encode("ascii")))


_NONE = Signature((0,) * BINS)


def estimate_similarity(a: Signature, b: Signature) -> float:
    """The estimated shingle Jaccard of two texts: the share of equal bins.

    Args:
        a: One signature.
        b: The other.

    Returns:
        A value in [0, 1].
    """
    equal: int = sum(map(eq, a.values, b.values))
    return equal / BINS


def signature_of(found: Sequence[str]) -> Signature:
    """The signature of one text's terms (a text without terms has all bins zero).

    Args:
        found: The text's canonical terms (:func:`~.text_norm.terms`).

    Returns:
        Its signature.
    """
    single = list(map(_term_hash, found))
    pairs = [((a * _MIX_A) ^ b) * _MIX_B & _MASK for a, b in pairwise(single)]
    if not single:
        return _NONE
    bins = [_EMPTY] * BINS
    # A repeated shingle changes no minimum: no need to make the hashes a set first.
    for value in (*single, *pairs):
        slot, low = value >> _SHIFT, value & 0xFFFFFFFF
        if low < bins[slot]:
            bins[slot] = low
    dense = bins[:]
    for slot, value in enumerate(bins):
        if value == _EMPTY:
            for probe in _PROBES[slot]:
                if bins[probe] != _EMPTY:
                    dense[slot] = bins[probe]
                    break
            else:  # one or two shingles: the probes may all miss; any fixed choice will do
                dense[slot] = min(bins)
    return Signature(tuple(dense))


def signatures(texts: Sequence[Sequence[str]]) -> list[Signature]:
    """The signatures of many texts' terms, each equal to :func:`signature_of`'s.

    Args:
        texts: Each text's canonical terms.

    Returns:
        One signature per text, in order.
    """
    if len(texts) < _BATCH:
        return [signature_of(found) for found in texts]
    sizes = np.fromiter(map(len, texts), np.int64, len(texts))
    total = int(sizes.sum())
    if total == 0:
        return [_NONE] * len(texts)
    # The only loop per term: hashing (kept per term).
    single = np.fromiter(map(_term_hash, chain.from_iterable(texts)), np.uint64, total)
    owner = np.repeat(np.arange(len(texts)), sizes)
    # A pair joins two neighbouring terms of one text. uint64 products wrap modulo 2**64:
    # the low 64 bits of the exact products, which is what the masks keep in signature_of().
    same = owner[1:] == owner[:-1]
    pairs = ((single[:-1][same] * np.uint64(_MIX_A)) ^ single[1:][same]) * np.uint64(_MIX_B)
    hashes = np.concatenate((single, pairs))
    owners = np.concatenate((owner, owner[1:][same]))
    slots = (hashes >> np.uint64(_SHIFT)).astype(np.int64)
    flat = np.full(len(texts) * BINS, _EMPTY, np.uint64)
    np.minimum.at(flat, owners * BINS + slots, hashes & np.uint64(0xFFFFFFFF))
    bins = flat.reshape(len(texts), BINS)
    filled = bins != _EMPTY
    table, order = _borrowing()
    held = np.packbits(filled, axis=1, bitorder="little")
    placed = table[0][:, held[:, 0]]
    for byte in range(1, BINS // 8):
        placed |= table[byte][:, held[:, byte]]
    missed = placed == 0
    # The lowest set bit, its place from its power of two (exact in a double up to 2**53).
    lowest = np.where(missed, np.uint64(1), placed & (~placed + np.uint64(1)))
    first = np.log2(lowest.astype(np.float64)).astype(np.intp)
    borrowed = np.take_along_axis(bins, np.take_along_axis(order, first, axis=1).T, axis=1)
    if missed.any():  # no probe filled: the smallest filled bin, as signature_of() takes it
        smallest = np.where(filled, bins, np.uint64(_EMPTY)).min(axis=1)
        borrowed = np.where(missed.T, smallest[:, None], borrowed)
    dense = np.where(filled, bins, borrowed).tolist()
    return [
        Signature(tuple(row)) if size else _NONE for row, size in zip(dense, sizes, strict=True)
    ]
