"""Why a record waits for review, in words: the record it contests (with both trust levels) or
what the configured safety scanner finds in it (kinds and counts, never the text it matched).
``ditto memory review`` and the page's review queue both say it this way."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ditto.app.config import Settings
    from workers.memory import MemoryItem

__all__ = ("safety_kinds", "why_waiting")


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
