"""``RetryPolicy``: when and how often the runtime calls a node again after it failed.

Retries are explicit: without a policy a node runs exactly once, whatever its error says. A
policy is a plain value, declared on a graph task (``graph().node(..., retry=...)``), on one call
(``runtime.invoke(..., retry=...)``) or as a worker's default for its node types
(``define_worker(..., retry=...)``); the runtime applies it in one place (see
:mod:`ditto.runtime.retry`). It lives here, beside ``NodeResult``, because graphs declare it and
the graph layer may not import the runtime.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

from ditto.errors import ErrorCode, ErrorInfo, InvalidInputError

__all__ = ("NEVER_RETRIED", "RetryPolicy")

NEVER_RETRIED: Final = frozenset(
    {ErrorCode.INVALID_INPUT.value, ErrorCode.INTERRUPTED.value, ErrorCode.CANCELLED.value}
)
"""Codes no policy retries: the same input fails the same way, an interrupt waits for a person,
and a cancellation was asked for."""


@dataclass(frozen=True, slots=True, init=False, repr=False)
class RetryPolicy:
    """Call a failed node again, with exponential backoff and jitter, within its deadline.

    Attempt 1 runs; while the result is not a success, its error is retryable (``retryable`` is
    true, or, when ``retry_on`` is given, its code is one of those — and only those), attempts
    remain and the call's deadline leaves room for the pause, the runtime waits and calls again.
    The pause after attempt *n* is ``initial * multiplier ** (n - 1)`` seconds, at most ``max``,
    then jittered. The call's timeout bounds all its attempts together: a pause that would end
    past the deadline is not taken, and the result is the last attempt's. ``INVALID_INPUT``,
    ``INTERRUPTED`` and ``CANCELLED`` are never retried, nor is the caller's own cancellation
    (it propagates, also during a pause). ``RetryPolicy(max_attempts=1)`` retries nothing: on a
    call or a task it switches a worker's default policy off. To retry an attempt that hangs,
    give each attempt a deadline of its own (``attempt_timeout``): its ``TIMEOUT`` is then
    retried while the call's deadline leaves room.

    Args:
        max_attempts: Attempts in all, the first included (``>= 1``).
        initial: Seconds before the second attempt (``>= 0``).
        multiplier: Growth of the pause per attempt (``>= 1``).
        max: Longest pause in seconds (``>= initial``).
        jitter: ``True`` (full jitter: a pause uniform in ``[0, d]``), ``False`` (exactly ``d``),
            or a fraction ``f`` in ``[0, 1]`` (uniform in ``[d * (1 - f), d]``). Jitter spreads
            the retries of many callers that failed together.
        retry_on: Codes to retry (``ErrorCode`` members or strings); then *only* these, whether
            or not the error says it is retryable. ``None``: every ``retryable`` error.
        attempt_timeout: Seconds each attempt may take (``> 0``), within the call's deadline;
            ``None``: every attempt may use what is left of the call's.

    Raises:
        InvalidInputError: ``INVALID_INPUT`` for a value out of range, naming the argument.
    """

    max_attempts: int
    initial: float
    multiplier: float
    max: float
    jitter: float
    """The jitter as a fraction: 1.0 for ``True``, 0.0 for ``False``."""
    retry_on: frozenset[str] | None
    attempt_timeout: float | None

    def __init__(
        self,
        max_attempts: int = 3,
        initial: float = 0.5,
        multiplier: float = 2.0,
        max: float = 30.0,
        jitter: bool | float = True,
        retry_on: Iterable[ErrorCode | str] | None = None,
        attempt_timeout: float | None = None,
    ) -> None:
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise InvalidInputError("RetryPolicy: max_attempts must be an integer >= 1")
        initial = _seconds("initial", initial)
        max = _seconds("max", max)
        if max < initial:
            raise InvalidInputError("RetryPolicy: max must be >= initial")
        if (
            isinstance(multiplier, bool)
            or not isinstance(multiplier, int | float)
            or not math.isfinite(multiplier)
            or multiplier < 1
        ):
            raise InvalidInputError("RetryPolicy: multiplier must be a finite number >= 1")
        if isinstance(jitter, bool):
            fraction = 1.0 if jitter else 0.0
        elif isinstance(jitter, int | float) and 0 <= jitter <= 1:
            fraction = float(jitter)
        else:
            raise InvalidInputError(
                "RetryPolicy: jitter must be True, False or a fraction between 0 and 1"
            )
        if attempt_timeout is not None and _seconds("attempt_timeout", attempt_timeout) == 0:
            raise InvalidInputError("RetryPolicy: attempt_timeout must be a positive number")
        set_ = object.__setattr__
        set_(self, "max_attempts", max_attempts)
        set_(self, "initial", initial)
        set_(self, "multiplier", float(multiplier))
        set_(self, "max", max)
        set_(self, "jitter", fraction)
        set_(self, "retry_on", None if retry_on is None else _codes(retry_on))
        set_(self, "attempt_timeout", None if attempt_timeout is None else float(attempt_timeout))

    def attempt_deadline(self, deadline: float, now: float) -> float:
        """The deadline of an attempt starting at ``now`` of a call due at ``deadline``."""
        limit = self.attempt_timeout
        return deadline if limit is None or now + limit >= deadline else now + limit

    def retries(self, error: ErrorInfo) -> bool:
        """Whether a result with ``error`` may be retried under this policy (attempts and the
        deadline aside)."""
        code = error.code
        if code in NEVER_RETRIED:
            return False
        if self.retry_on is None:
            return error.retryable
        return code in self.retry_on

    def delay(self, attempt: int, draw: Callable[[], float] = random.random) -> float:
        """Seconds to wait after attempt ``attempt`` (1-based) failed, jitter applied.

        Args:
            draw: A uniform number in ``[0, 1)`` (tests pass a fixed one).
        """
        try:
            nominal = min(self.max, self.initial * self.multiplier ** (attempt - 1))
        except OverflowError:
            nominal = self.max
        if self.jitter:
            return nominal * (1.0 - self.jitter * draw())
        return nominal

    def __repr__(self) -> str:
        codes = None if self.retry_on is None else sorted(self.retry_on)
        return (
            f"RetryPolicy(max_attempts={self.max_attempts}, initial={self.initial}, "
            f"multiplier={self.multiplier}, max={self.max}, jitter={self.jitter}, "
            f"retry_on={codes}, attempt_timeout={self.attempt_timeout})"
        )


def _seconds(name: str, value: object) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        raise InvalidInputError(f"RetryPolicy: {name} must be a finite number of seconds >= 0")
    return float(value)


def _codes(retry_on: Iterable[ErrorCode | str]) -> frozenset[str]:
    if isinstance(retry_on, str) or not isinstance(retry_on, Iterable):
        raise InvalidInputError(
            "RetryPolicy: retry_on must be a list of error codes, e.g. ['TIMEOUT'], or None"
        )
    items = list(retry_on)
    if not items or not all(isinstance(code, str) for code in items):
        raise InvalidInputError(
            "RetryPolicy: retry_on must name at least one error code, each a string "
            "(use max_attempts=1 to retry nothing)"
        )
    codes = frozenset(str(code) for code in items)
    for code in sorted(codes):
        if not code or code.upper() != code or not code.replace("_", "").isalnum():
            raise InvalidInputError(
                f"RetryPolicy: retry_on: {code!r} is not an UPPER_SNAKE error code"
            )
        if code in NEVER_RETRIED:
            raise InvalidInputError(f"RetryPolicy: {code} is never retried")
    return codes
