"""Dedupe for MEMORY writes: an exact hash, a MinHash signature with LSH candidates, and the
near-duplicate decision.

What a store keeps per record: :func:`exact_hash` (32 hex characters, an indexed column: exact
dedupe is one lookup) and :func:`signature` (``Signature.to_bytes()``, 129 bytes, or
``to_str()``, 172 characters), from which :class:`CandidateIndex` is rebuilt for a namespace's
recent records. A candidate is then confirmed on the two texts by :func:`is_near_duplicate`.
The signature scheme is :mod:`.minhash`, the candidate index :mod:`.lsh` (both re-exported
here); :func:`fingerprints` does a whole write's texts at once (a batch of 100 short texts:
about 3 µs a signature, against 7 one by one).

Choices, measured on the dev split of ``bench/data/write_policy`` (``bench/write_policy_pairs.py``):

- Shingles are the canonical terms of :mod:`.text_norm` and their adjacent pairs (k = 1 and 2
  together). Memory texts are short: with k = 2 alone one changed word in a six-word sentence
  drops the Jaccard below 0.5, with k = 1 alone word order is lost ("Bob owes Alice" = "Alice
  owes Bob"). Together they keep both.
- MinHash is *one-permutation hashing* (Li, Owen, Zhang 2012) with optimal densification
  (Shrivastava 2017): each shingle is hashed once, its top bits choose one of 32 bins, a bin
  keeps its minimum, and an empty bin borrows a filled one along a fixed probe sequence. It is
  an unbiased MinHash estimator at one hash per shingle. 32 classic permutations cost 32
  multiply-and-min passes per shingle: measured ~150 µs per signature of a 15-word text,
  against ~19 µs here when it was written (of which ~9 µs was tokenising; now ~1 µs for an
  ASCII text, and the analysis of a recent text is cached). Dev mean |estimate - exact| is 0.04.
- LSH: 16 bands of 2 bins. Contradiction candidates ("lives in Berlin" / "lives in Paris") sit
  near Jaccard 0.5 (dev median 0.57, minimum 0.25); 16x2 finds a pair at J = 0.5 with
  probability 0.99 and one at J = 0.1 with 0.15 (the exact check discards those). On dev it
  finds 0.976 of contradiction pairs (10x3: 0.805, 8x4: 0.609; 32x1 finds all but hands over
  a third of unrelated pairs, 16x2 one in twenty).
- No Python ``hash()`` (salted per process) and no unseeded randomness: a signature is the same
  on every run and machine, so it can be stored.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from .align import gaps
from .lsh import MAX_BUCKET, MAX_CANDIDATES, CandidateIndex
from .minhash import BANDS, BINS, Signature, estimate_similarity, signature_of, signatures
from .text_norm import normalise, shingles, terms, tokens_and_terms

__all__ = (
    "BANDS",
    "BINS",
    "MAX_BUCKET",
    "MAX_CANDIDATES",
    "NEAR_DUPLICATE_COSINE",
    "NEAR_DUPLICATE_JACCARD",
    "CandidateIndex",
    "Signature",
    "estimate_similarity",
    "exact_hash",
    "fingerprint",
    "fingerprints",
    "is_near_duplicate",
    "jaccard",
    "moved_as_a_block",
    "same_terms",
    "signature",
)

NEAR_DUPLICATE_JACCARD = 0.6
"""Shingle Jaccard at or above which two texts with the same terms are one fact (dev-tuned)."""
NEAR_DUPLICATE_COSINE = 0.9
"""Embedding cosine a near duplicate must also reach when the caller has one (not tuned here:
the benchmark runs without an embedder; 0.9 is a conservative sentence-embedding bar)."""


def exact_hash(text: str) -> str:
    """A stable hex digest of the normalised text: equal for case/space/punctuation variants.

    Args:
        text: The record's text.

    Returns:
        32 hex characters (BLAKE2b, 128 bits), to keep in an indexed column.
    """
    return hashlib.blake2b(normalise(text).encode(), digest_size=16).hexdigest()


def signature(text: str) -> Signature:
    """The MinHash signature of ``text`` (see the module notes for the scheme).

    Args:
        text: The record's text.

    Returns:
        Its signature; a text without terms has all bins zero.
    """
    return signature_of(terms(text))


def fingerprint(text: str) -> tuple[str, Signature]:
    """:func:`exact_hash` and :func:`signature` of ``text``, tokenising it once.

    Args:
        text: The record's text.

    Returns:
        ``(exact_hash, signature)``: what a store keeps beside the record.
    """
    normal, found = tokens_and_terms(text)
    digest = hashlib.blake2b(" ".join(normal).encode(), digest_size=16).hexdigest()
    return digest, signature_of(found)


def fingerprints(texts: Sequence[str]) -> list[tuple[str, Signature, int]]:
    """:func:`fingerprint` of many texts (their signatures computed together, a fraction of
    the cost of one by one), each with a key of its terms taken as a multiset (a bag).

    :func:`is_near_duplicate` holds only for texts with the same terms the same number of
    times, so two texts whose bags differ are never near duplicates: a dedupe candidate with
    another bag need not be read or compared at all (equal bags still need the check).

    Args:
        texts: The records' texts.

    Returns:
        ``(exact_hash, signature, bag)`` per text, in order; the bag is a 64-bit hash of the
        sorted terms.
    """
    digests = []
    bags = []
    found = []
    blake2b = hashlib.blake2b
    for text in texts:
        normal, kept = tokens_and_terms(text)
        digests.append(blake2b(" ".join(normal).encode(), digest_size=16).hexdigest())
        bag = blake2b("\0".join(sorted(kept)).encode(), digest_size=8).digest()
        bags.append(int.from_bytes(bag, "little"))
        found.append(kept)
    return list(zip(digests, signatures(found), bags, strict=True))


def jaccard(a: str, b: str) -> float:
    """The exact shingle Jaccard of two texts (terms and term pairs, see :mod:`.text_norm`).

    Args:
        a: One text.
        b: The other.

    Returns:
        A value in [0, 1]; two texts without terms are 1.0 apart from nothing, i.e. equal.
    """
    sa, sb = shingles(terms(a)), shingles(terms(b))
    union = len(sa | sb)
    return len(sa & sb) / union if union else 1.0


def same_terms(a: Sequence[str], b: Sequence[str]) -> bool:
    """Whether two term sequences hold the same terms the same number of times."""
    return sorted(a) == sorted(b)


def moved_as_a_block(a: Sequence[str], b: Sequence[str]) -> bool:
    """Whether ``b`` is ``a`` with at most one run of terms moved, the run's order kept.

    "On Monday Alice swims" / "Alice swims on Monday" moves one run: the same fact. "Bob owes
    Alice" / "Alice owes Bob" swaps two terms: the terms left outside the common blocks come
    in a different order, so it is another fact, however high the shingle Jaccard.
    """
    left_a: list[str] = []
    left_b: list[str] = []
    for i1, i2, j1, j2 in gaps(a, b):
        left_a += a[i1:i2]
        left_b += b[j1:j2]
    return left_a == left_b


def is_near_duplicate(
    a: str,
    b: str,
    *,
    cosine: float | None = None,
    min_jaccard: float = NEAR_DUPLICATE_JACCARD,
    min_cosine: float = NEAR_DUPLICATE_COSINE,
) -> bool:
    """Whether ``b`` states the same fact as ``a`` in (nearly) the same words.

    True when the two texts have the same canonical terms (fillers, spelling, inflection and
    the synonym lexicon folded: so a differing number, date, negation or object is never a
    duplicate), their shingle Jaccard reaches ``min_jaccard`` and at most one run of words
    moved (word order kept: no swapped roles), and, if the caller has an embedding cosine, it
    reaches ``min_cosine``.

    Args:
        a: The stored text.
        b: The incoming text.
        cosine: The embedding cosine of the two texts, when an embedder is configured.
        min_jaccard: The shingle Jaccard bar.
        min_cosine: The cosine bar.

    Returns:
        Whether ``b`` is a duplicate of ``a``.
    """
    ta, tb = terms(a), terms(b)
    if ta == tb:
        return cosine is None or cosine >= min_cosine
    if not same_terms(ta, tb):
        return False
    if cosine is not None and cosine < min_cosine:
        return False
    sa, sb = shingles(ta), shingles(tb)
    return len(sa & sb) / len(sa | sb) >= min_jaccard and moved_as_a_block(ta, tb)
