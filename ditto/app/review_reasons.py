"""The review queue as ``ditto memory review`` and the page's review queue both show it: which
records wait (one ``MEMORY.QUERY`` page, with the records the contested ones contradict), and
why, in words: the record it contests (with both trust levels) or what the configured safety
scanner finds in it (kinds and counts, never the text it matched)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ditto.app.config import Settings
    from workers.memory import MemoryItem

__all__ = ("PENDING", "safety_kinds", "waiting_for_review", "why_waiting")

PENDING = ["contested", "quarantined"]
"""The statuses of records that wait for a person's decision."""

Call = Callable[[str, dict[str, Any]], Awaitable[Any]]
"""Invokes a MEMORY node (as the caller's principal) and returns its output."""


async def waiting_for_review(
    call: Call, namespace: str | None, limit: int, cursor: str | None
) -> tuple[Any, dict[str, MemoryItem]]:
    """One page of records waiting for review (``MEMORY.QUERY``'s output) and, by id, the
    records the contested ones contradict, whatever has become of them since."""
    filter: dict[str, Any] = {"status": PENDING, "include": PENDING, "archived": "include"}
    if namespace is not None:
        filter["namespace"] = namespace
    request: dict[str, Any] = {"filter": filter, "limit": limit}
    if cursor:
        request["cursor"] = cursor
    page = await call("MEMORY.QUERY", request)
    targets = sorted({item.contests for item in page.items if item.contests})
    if not targets:
        return page, {}
    everything = {
        "ids": targets,
        "include": ["superseded", "contested", "quarantined", "expired"],
        "include_archived": True,
    }
    return page, {item.id: item for item in (await call("MEMORY.GET", everything)).items}


def why_waiting(item: MemoryItem, target: MemoryItem | None, safety: dict[str, int]) -> str:
    """Why ``item`` waits, in words."""
    reasons = []
    if item.status == "contested":
        if target is None:
            reasons.append(f"contests {item.contests} (no longer stored)")
        else:
            trust = f"{target.trust or 'no trust'} over {item.trust or 'no trust'}"
            reasons.append(f"contests {target.key or target.id} ({target.status}, {trust})")
    if safety:
        found = ", ".join(f"{kind} ×{count}" for kind, count in sorted(safety.items()))
        reasons.append(f"safety: {found}")
    elif item.status == "quarantined":
        reasons.append("quarantined (the safety rules in force find nothing now)")
    return "; ".join(reasons)


def safety_kinds(settings: Settings, items: list[MemoryItem]) -> dict[str, dict[str, int]]:
    """What the configured safety scanner finds in each record: kinds and counts (never the
    text), over the fields the write policy's safety stage scans."""
    from ditto.app.bootstrap import build_write_policy
    from workers.memory.policy.safety import SafetyScanner, decide

    rules = build_write_policy(settings).safety
    scanner = SafetyScanner(rules)
    found: dict[str, dict[str, int]] = {}
    for item in items:
        fields = {
            "content": item.content,
            "summary": item.summary,
            "tags": item.tags,
            "metadata": item.metadata,
            "source": item.source,
        }
        findings = [finding for _, finding in scanner.scan_json(fields)]
        found[item.id] = dict(decide(findings, rules).counts) if findings else {}
    return found
