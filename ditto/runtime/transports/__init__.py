"""Transports to workers in other processes: the :class:`Transport` port, signed envelopes, and
Redis Streams (:class:`RedisStreamsTransport` for callers, :class:`RemoteWorkerServer` for
workers). The Redis modules load on first use, so importing this package imports no driver."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ditto.lazy import lazy_attributes
from ditto.runtime.transports.envelope import CallEnvelope, ReplyEnvelope, Signer
from ditto.runtime.transports.port import Transport

if TYPE_CHECKING:
    from ditto.runtime.transports.redis_streams import RedisStreamsTransport
    from ditto.runtime.transports.redis_worker import RemoteWorkerServer

__all__ = (
    "CallEnvelope",
    "RedisStreamsTransport",
    "RemoteWorkerServer",
    "ReplyEnvelope",
    "Signer",
    "Transport",
)

__getattr__ = lazy_attributes(
    __name__,
    globals(),
    {
        "RedisStreamsTransport": "ditto.runtime.transports.redis_streams",
        "RemoteWorkerServer": "ditto.runtime.transports.redis_worker",
    },
)
