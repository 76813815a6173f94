"""What the dedupe stage holds of one namespace: its live records with their texts'
fingerprints (exact hash, MinHash signature in an LSH index, bag of terms), and the versions
of records it knows are not live — so a reader of the store's change feed can tell, from an
id and a version alone, whether a change is one it already holds."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

from workers.memory.model.contracts import MemoryItem
from workers.memory.model.planning import is_live
from workers.memory.model.records import content_text
from workers.memory.policy.similarity import CandidateIndex, Signature, exact_hash, fingerprints
from workers.memory.policy.term_spans import head_term

__all__ = ("Entry", "NamespaceIndex", "Print", "waiting")

Print = tuple[str, Signature, int]
"""A text's exact hash, signature and bag."""

SHORT_TEXT = 80
"""Texts up to this many characters are also indexed by their subject's head term: a short
statement shares too few shingles with its contradiction ("Oliver likes spicy food" /
"Oliver dislikes spicy food") for LSH to pair them reliably."""
_HEAD_KEPT = 16
"""Short records kept per head term (the newest)."""
_GONE_KEPT = 8192
"""Records known not live, per namespace, kept for the change feed (past it, the oldest is
dropped: the feed then reads it again, once)."""


class Entry(NamedTuple):
    item: MemoryItem
    """The record as last read or written."""
    text: str
    text_hash: str
    bag: int
    """The bag of its terms (see :func:`~workers.memory.policy.similarity.fingerprints`)."""


@dataclass(slots=True)
class NamespaceIndex:
    entries: dict[str, Entry] = field(default_factory=dict)
    """Id -> an active record of the namespace."""
    hashes: dict[str, str] = field(default_factory=dict)
    """Exact hash -> the id of an active record with that text."""
    bag_count: dict[int, int] = field(default_factory=dict)
    """Bag -> how many records hold it."""
    index: CandidateIndex[str] = field(default_factory=CandidateIndex)
    heads: dict[str, dict[str, None]] = field(default_factory=dict)
    """Head term -> the ids of short records whose subject it heads, oldest first."""
    head_of: dict[str, str] = field(default_factory=dict)
    """Id -> the head term a short record is kept under."""
    claims: dict[str, MemoryItem] = field(default_factory=dict)
    """Exact hash -> a contested record with that text (a claim waiting for review): stating
    it again adds nothing to the queue."""
    claim_hash: dict[str, str] = field(default_factory=dict)
    """Id -> the exact hash a contested record is held under in :attr:`claims`."""
    gone: dict[str, int] = field(default_factory=dict)
    """Id -> the version at which a record is known not to be live (superseded, contested,
    quarantined, archived, expired), oldest first."""

    def knows(self, record_id: str, version: int) -> bool:
        """Whether the record at ``version`` is what this index already holds of it."""
        entry = self.entries.get(record_id)
        if entry is not None:
            return entry.item.version == version
        return self.gone.get(record_id) == version

    def learn(self, records: Sequence[tuple[MemoryItem, str, Print]]) -> None:
        """Index active records, each with its text and that text's fingerprint."""
        for item, text, (text_hash, _, bag) in records:
            self.forget(item.id)
            self.entries[item.id] = Entry(item, text, text_hash, bag)
            self.hashes.setdefault(text_hash, item.id)
            self.bag_count[bag] = self.bag_count.get(bag, 0) + 1
            if len(text) <= SHORT_TEXT and item.key is None:
                self._hold_head(item.id, text)
        self.index.add_many([(item.id, sig) for item, _, (_, sig, _) in records])

    def read(self, items: Sequence[MemoryItem], now: datetime) -> None:
        """Bring the entries of ``items`` up to date with the store's records."""
        changed = []
        for item in items:
            entry = self.entries.get(item.id)
            if not is_live(item, now):
                self.retire(item)
                if waiting(item, now):
                    self.hold_claim(item, exact_hash(content_text(item.content)))
            elif entry is None or (entry.item.version, entry.item.content) != (
                item.version,
                item.content,
            ):
                changed.append(item)
            else:  # the same text: keep its fingerprint, hold the record as it now stands
                self.entries[item.id] = entry._replace(item=item)
        if changed:
            texts = [content_text(item.content) for item in changed]
            prints = fingerprints(texts)
            self.learn(list(zip(changed, texts, prints, strict=True)))

    def hold_claim(self, item: MemoryItem, text_hash: str) -> None:
        """Hold a contested record (already retired) under its text's exact hash."""
        self.claims[text_hash] = item
        self.claim_hash[item.id] = text_hash

    def retire(self, item: MemoryItem) -> None:
        """Take a record that is not live out of the index, remembering its version."""
        self.forget(item.id)
        self.gone.pop(item.id, None)  # re-inserted: the newest last
        self.gone[item.id] = item.version
        if len(self.gone) > _GONE_KEPT:
            del self.gone[next(iter(self.gone))]

    def by_head(self, text: str) -> list[str]:
        """The short keyless records whose subject ``text``'s head term heads, newest first."""
        head = head_term(text) if len(text) <= SHORT_TEXT else None
        return list(reversed(self.heads.get(head, {}))) if head is not None else []

    def _hold_head(self, record_id: str, text: str) -> None:
        head = head_term(text)
        if head is None:
            return
        held = self.heads.setdefault(head, {})
        held[record_id] = None
        self.head_of[record_id] = head
        if len(held) > _HEAD_KEPT:
            oldest = next(iter(held))
            del held[oldest]
            del self.head_of[oldest]

    def forget(self, record_id: str) -> None:
        claimed = self.claim_hash.pop(record_id, None)
        if claimed is not None and self.claims[claimed].id == record_id:
            del self.claims[claimed]
        head = self.head_of.pop(record_id, None)
        if head is not None:
            held = self.heads[head]
            del held[record_id]
            if not held:
                del self.heads[head]
        entry = self.entries.pop(record_id, None)
        if entry is None:
            return
        left = self.bag_count.pop(entry.bag) - 1
        if left:
            self.bag_count[entry.bag] = left
        if self.hashes.get(entry.text_hash) == record_id:
            del self.hashes[entry.text_hash]
        self.index.remove(record_id)


def waiting(item: MemoryItem, now: datetime) -> bool:
    """Whether ``item`` is a claim waiting for review: contested, neither archived nor expired."""
    return (
        item.status == "contested"
        and item.archived_at is None
        and (item.expires_at is None or item.expires_at > now)
    )
