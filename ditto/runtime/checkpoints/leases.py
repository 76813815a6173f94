"""What every checkpoint store shares about leases: the checks of their arguments (before any
I/O, so each backend refuses exactly the same things) and the two errors a lease ends in.

The lease logic itself (one counter of tokens per store, expiry on the store's clock, the fence
checked in the write's own transaction or script) is each backend's: it has to be atomic there.
"""

from __future__ import annotations

import math
import re

from ditto.errors import ErrorCode
from ditto.runtime.checkpoints.port import CheckpointError, Lease, checked_id

__all__ = (
    "MAX_HOLDER_LENGTH",
    "MAX_TTL",
    "busy",
    "checked_fence",
    "checked_holder",
    "checked_lease",
    "checked_ttl",
    "lease_lost",
)

MAX_HOLDER_LENGTH = 200
"""Longest lease holder, in characters."""

MAX_TTL = 86_400.0
"""Longest lease, in seconds: a run renews its lease while it goes on, so a long one only
delays the next opener after a crash."""

_FORBIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def _invalid(message: str) -> CheckpointError:
    return CheckpointError(ErrorCode.INVALID_INPUT, message)


def checked_holder(holder: object) -> str:
    """``holder`` if it is a valid lease holder.

    Raises:
        CheckpointError: ``INVALID_INPUT``.
    """
    if (
        type(holder) is not str
        or not 0 < len(holder) <= MAX_HOLDER_LENGTH
        or _FORBIDDEN.search(holder) is not None
    ):
        raise _invalid(
            f"a lease holder must be a string of 1 to {MAX_HOLDER_LENGTH} characters "
            "without control characters"
        )
    return holder


def checked_ttl(ttl: object) -> float:
    """``ttl`` as a float, if it is a valid lease duration.

    Raises:
        CheckpointError: ``INVALID_INPUT`` unless ``ttl`` is an ``int`` or ``float`` (not a
            ``bool``), finite, above 0 and at most :data:`MAX_TTL`.
    """
    if (
        isinstance(ttl, bool)
        or not isinstance(ttl, int | float)
        or not math.isfinite(ttl)
        or not 0 < ttl <= MAX_TTL
    ):
        raise _invalid(f"a lease ttl must be a number of seconds above 0 and at most {MAX_TTL:g}")
    return float(ttl)


def checked_lease(lease: object) -> Lease:
    """``lease`` if it is a :class:`~ditto.runtime.checkpoints.port.Lease`.

    Raises:
        CheckpointError: ``INVALID_INPUT``.
    """
    if not isinstance(lease, Lease):
        raise _invalid(f"a lease must be a Lease, not {type(lease).__name__}")
    # A Struct does not check its fields when built by hand: a token that is not an int would
    # never match the store's, and an id must be as valid as the one of any call.
    checked_id(lease.checkpoint_id)
    if type(lease.token) is not int:
        raise _invalid("a lease token must be an integer")
    return lease


def checked_fence(checkpoint_id: str, fence: object) -> int | None:
    """The fencing token of ``fence`` (``None`` without one), after checking it is a lease of
    ``checkpoint_id``.

    Raises:
        CheckpointError: ``INVALID_INPUT``.
    """
    if fence is None:
        return None
    lease = checked_lease(fence)
    if lease.checkpoint_id != checkpoint_id:
        raise _invalid("the fence is the lease of another checkpoint")
    return lease.token


def busy(holder: str, expires_in: float) -> CheckpointError:
    """``CHECKPOINT_BUSY`` (retryable): ``holder`` holds the lease for ``expires_in`` more
    seconds of the store's clock (both in ``details``, so a caller can wait or report)."""
    return CheckpointError(
        ErrorCode.CHECKPOINT_BUSY,
        "another run holds this checkpoint's lease",
        retryable=True,
        details={"holder": holder, "expires_in": max(0.0, float(expires_in))},
    )


def lease_lost() -> CheckpointError:
    """``CHECKPOINT_LEASE_LOST``: not retryable, the run must stop writing."""
    return CheckpointError(
        ErrorCode.CHECKPOINT_LEASE_LOST,
        "this checkpoint's lease expired, was released or was taken over",
    )
