"""The retry loop: one call made of several attempts under a :class:`RetryPolicy`.

Kept out of :func:`~ditto.runtime.invocation.invoke_route`'s body so a call without a policy pays
nothing for retries (one attribute read and one comparison): the invocation hands this loop a
function running one attempt, and the loop decides whether, and when, to run another.

What every attempt shares and what it does not: all attempts of a call have the same
``ctx.idempotency_key`` (it names the *work*, so a side effect keyed by it happens once however
many attempts ran) and the same deadline (the call's timeout bounds all of them together); each
attempt is a new invocation with its own execution id (a remote worker that remembers executed
ids must run the retry), and ``ctx.attempt`` counts up from the call's first attempt.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from time import perf_counter
from typing import Any, Final

import msgspec

from ditto.contracts.result import AttemptInfo, NodeResult
from ditto.contracts.retry import RetryPolicy

__all__ = ("ONCE", "Attempt", "retried")

logger = logging.getLogger("ditto.runtime")

ONCE: Final = RetryPolicy(max_attempts=1)
"""The policy of one attempt of a retried call: the invocation runs it without the loop."""

Attempt = Callable[[int], Awaitable[NodeResult[Any]]]
"""``attempt(n)`` runs attempt ``n`` (1-based) of the call and returns its result."""


async def retried(
    policy: RetryPolicy,
    attempt: Attempt,
    deadline: float,
    first: NodeResult[Any],
    started: float,
    draw: Callable[[], float] = random.random,
) -> NodeResult[Any]:
    """Run attempts after ``first`` until one succeeds, fails for good, the attempts run out or
    the deadline leaves no room for the next pause.

    Args:
        policy: When to retry and how long to wait.
        attempt: Runs attempt ``n`` (2 and up; the caller ran the first, so a call that
            succeeds at once pays for no more than that).
        deadline: The call's absolute deadline on the event loop's clock: no pause ends after
            it (the result is then the last attempt's).
        first: The first attempt's result.
        started: ``perf_counter()`` when the first attempt started.
        draw: Uniform numbers in ``[0, 1)`` for the jitter.

    Returns:
        The last attempt's result; after a retry with ``attempts`` and the earlier attempts in
        ``retries``, and ``duration_ms`` covering every attempt and pause.

    The caller's cancellation, during an attempt or a pause, propagates unchanged.
    """
    loop = asyncio.get_running_loop()
    earlier: list[AttemptInfo] = []
    number = 1
    result = first
    while True:
        error = result.error
        if (
            result.status == "success"
            or error is None
            or number >= policy.max_attempts
            or not policy.retries(error)
        ):
            break
        pause = policy.delay(number, draw)
        if loop.time() + pause >= deadline:
            break
        earlier.append(
            AttemptInfo(
                result.execution_id,
                result.status,
                error,
                result.worker_id,
                result.duration_ms,
                pause * 1000.0,
            )
        )
        logger.info(
            "retrying %s: attempt %d ended %s (%s); attempt %d in %.3f s",
            result.node,
            number,
            result.status,
            error.code,
            number + 1,
            pause,
        )
        await asyncio.sleep(pause)
        number += 1
        result = await attempt(number)
    if not earlier:
        return result
    return msgspec.structs.replace(
        result,
        attempts=number,
        retries=tuple(earlier),
        duration_ms=(perf_counter() - started) * 1000.0,
    )
