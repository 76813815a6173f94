"""The contract between a store that commits and the runtime's deadline of the running call.

A ``timeout`` result promises that nothing was written. A store that is about to commit (or
finds its commit already under way when the deadline cancels it) *claims the outcome*: from
then on the deadline no longer cancels the call, and the runtime reports the handler's real
result instead of ``timeout``. The runtime sets :data:`CURRENT` around every handler (see
:mod:`ditto.runtime.deadlines`); stores only call :func:`claim_outcome` and
:func:`deadline_fired`, so they never depend on the runtime's internals.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Protocol

__all__ = ("CURRENT", "Claimable", "claim_outcome", "deadline_fired")


class Claimable(Protocol):
    """The running call's deadline, as a store sees it."""

    fired: bool
    """The deadline passed and cancelled the call."""
    claimed: bool
    """A store claimed the call's outcome."""

    def disarm(self) -> None:
        """Never fire from now on (idempotent)."""


CURRENT: ContextVar[Claimable | None] = ContextVar("ditto_deadline", default=None)
"""The deadline of the invocation whose handler is running (set by the runtime)."""


def claim_outcome() -> None:
    """Say that the running invocation's work is committing (or has committed): its deadline no
    longer cancels it, and the runtime reports the handler's real result — also when the
    deadline had already fired while the commit was under way, which it would otherwise report
    as ``timeout`` (a promise that nothing was written). Call it on the event loop, right before
    a commit begins or when a cancelled wait finds one already begun. Outside an invocation it
    does nothing."""
    deadline = CURRENT.get()
    if deadline is not None:
        deadline.claimed = True
        deadline.disarm()


def deadline_fired() -> bool:
    """Whether the running invocation's deadline has cancelled it (``False`` outside one)."""
    deadline = CURRENT.get()
    return deadline is not None and deadline.fired
