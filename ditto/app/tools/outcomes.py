"""What a write did, said to a model in plain words: the agent tools report dedupe,
supersession, contest, quarantine and redaction so the model does not store a fact again or
trust one that was set aside."""

from __future__ import annotations

from workers.memory.model.outcomes import WriteOutcome

__all__ = ("say_outcome",)

_SAID = {
    "created": "Stored.",
    "updated": "Updated the memory under this key.",
    "deduplicated": "Already remembered: nothing new was stored.",
    "superseded": "Stored; it replaces an older memory, which is kept in history.",
    "contested": (
        "Stored as contested: it contradicts a more trusted memory, which still stands and is "
        "what recall returns."
    ),
    "quarantined": (
        "Held for review: it looks unsafe (for example a prompt injection) and is not recalled "
        "until a person accepts it."
    ),
}


def say_outcome(outcome: WriteOutcome) -> str:
    """One or two sentences on what the write did with a memory (kinds, never values)."""
    said = [_SAID[flag] for flag in outcome.outcome if flag in _SAID]
    if "redacted" in outcome.outcome:
        kinds = ", ".join(sorted(outcome.safety)) or "sensitive data"
        said.append(f"Removed before storing: {kinds}.")
    return " ".join(said)
